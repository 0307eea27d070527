#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dtnkit maintainers
# Apache License 2.0 (see LICENSE in the dtnkit repository)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: audit
short_description: Audit a host's tuning with dtnkit (reads only)
version_added: "0.1.0"
description:
  - Runs C(dtnkit tune audit --format json) on the managed host and returns the audit document,
    also as the host fact C(dtnkit_audit).
  - Never changes anything (C(changed) is always false); check mode runs the same audit.
  - Fails, naming the managed host, when dtnkit is missing or older than the collection.
options:
  profile:
    description: Profile name (C(dtn), C(measurement)) or a profile path on the managed host.
    type: str
    default: dtn
  groups:
    description: Only these groups (e.g. C(buffers), C(congestion)); all when empty.
    type: list
    elements: str
    default: []
    aliases: [group]
  rtt:
    description: Longest RTT the host must serve, e.g. C(150ms).
    type: str
    default: 100ms
  speed:
    description: Size speed-dependent items for this link speed, e.g. C(25gbit).
    type: str
  ifaces:
    description: Only these interfaces.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - dtn.dtnkit.common
author:
  - dtnkit maintainers (@dtnkit)
"""

EXAMPLES = r"""
- name: Audit the host against the dtn profile
  dtn.dtnkit.audit:
    rtt: 150ms
  register: audit

- name: Show what differs
  ansible.builtin.debug:
    var: ansible_facts.dtnkit_audit.counts
"""

RETURN = r"""
audit:
  description: The audit document (schema C(dtnkit.audit/2); sysctl triples as lists of integers), as C(dtnkit tune audit --format json) prints it.
  returned: success
  type: dict
audit_json:
  description: dtnkit's stdout exactly as printed (what a site sends as C(HOST.audit.json)).
  returned: success
  type: str
nic_mbps:
  description: The fastest speed any audited interface reports, in Mbit/s (the host's data NIC);
    null when none reports one (used by the NIC-headroom gate).
  returned: success
  type: int
compliant:
  description: Whether every selected item complies (dtnkit exits 0; 3 means it does not).
  returned: success
  type: bool
dtnkit_version:
  description: The dtnkit version found on the host (null when C(check_version) is false).
  returned: success
  type: str
ansible_facts:
  description: C(dtnkit_audit), the audit document.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dtn.dtnkit.plugins.module_utils.dtnkit import (
    DRIFT, Dtnkit, common_spec, selection_args, selection_spec)


def main():
    spec = common_spec()
    spec.update(selection_spec())
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    dtnkit = Dtnkit(module)
    rc, doc = dtnkit.run(["tune", "audit"] + selection_args(module.params), ok=(0, DRIFT))
    speeds = [i.get("speed_mbps") for i in doc.get("interfaces", []) if i.get("speed_mbps")]
    module.exit_json(changed=False, audit=doc, audit_json=dtnkit.stdout, compliant=rc == 0,
                     nic_mbps=max(speeds) if speeds else None, dtnkit_version=dtnkit.version,
                     ansible_facts=dict(dtnkit_audit=doc))


if __name__ == "__main__":
    main()
