"""Fleet reports: many hosts' audits, experiments and campaigns compared."""
