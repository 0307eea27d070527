"""dtnkit: tune, measure and test research data-transfer nodes."""

__version__ = "0.1.0"
