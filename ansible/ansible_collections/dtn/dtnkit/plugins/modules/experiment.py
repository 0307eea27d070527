#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dtnkit maintainers
# Apache License 2.0 (see LICENSE in the dtnkit repository)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: experiment
short_description: The NIC-headroom gate and the verdict of one tuning group on a host pair
version_added: "0.1.0"
description:
  - One group on a pair, both ends, is a sequence of steps on two hosts (save on both, baseline
    probe, gate, apply on both, probe, restore on both); the role
    C(dtn.dtnkit.pair_experiment) runs them. This module is the part that decides, by dtnkit's
    own rules (C(dtnkit fleet campaign gate|judge), the rule of C(dtnkit experiment)).
  - Without C(applied_bps) it is the gate (C(dtnkit fleet campaign gate)) - the group is kept off
    the pair (C(gated=true)) when it was measured harmful there before (C(measured_harmful)),
    or is predicted harmful - the baseline median leaves less headroom below the slower NIC
    of the two ends than the baseline's noise margin (at least 5 %), so no gain could show,
    only a loss.
  - With C(applied_bps) it is the verdict (C(dtnkit fleet campaign judge)) - C(helps) when the
    median beats the baseline median by more than the noise, C(harmful) when it loses by more,
    C(neutral) otherwise.
  - Reads only - C(changed) is always false; check mode runs the same way.
options:
  group:
    description: The tuning group (one).
    type: str
    required: true
  baseline_bps:
    description: Baseline throughputs of the pair in bit/s, one per run.
    type: list
    elements: float
    required: true
  applied_bps:
    description: Throughputs with the group applied on both ends, in bit/s; absent for the gate.
    type: list
    elements: float
  nic_speeds:
    description: NIC speeds of the two ends (e.g. C(10000mbit), C(25gbit)); the slower counts.
      Unknown when empty (then only C(measured_harmful) gates).
    type: list
    elements: str
    default: []
  measured_harmful:
    description: The group was judged harmful on this pair before (e.g. in an earlier campaign).
    type: bool
    default: false
extends_documentation_fragment:
  - dtn.dtnkit.common
author:
  - dtnkit maintainers (@dtnkit)
"""

EXAMPLES = r"""
- name: Gate the buffers group on the pair
  dtn.dtnkit.experiment:
    group: buffers
    baseline_bps: [9.1e9, 9.3e9]
    nic_speeds: [10gbit, 25gbit]
  register: gate

- name: Judge it after the applied probes
  dtn.dtnkit.experiment:
    group: buffers
    baseline_bps: [9.1e9, 9.3e9]
    applied_bps: [9.8e9, 9.7e9]
  register: verdict
  when: not gate.gated
"""

RETURN = r"""
gated:
  description: Whether the group must stay off the pair (always false for a verdict).
  returned: success
  type: bool
verdict:
  description: C(gated) (the gate kept it off), else C(helps), C(neutral) or C(harmful);
    null for a gate that lets the group through.
  returned: success
  type: str
why:
  description: The reason in one line.
  returned: success
  type: str
result:
  description: The entry of the campaign schema (C(dtnkit.campaign/1) results) - group, verdict,
    applied, ratio, margin, baseline_bps, applied_bps, why; from dtnkit's JSON.
  returned: success
  type: dict
dtnkit_version:
  description: The dtnkit version found on the host (null when C(check_version) is false).
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dtn.dtnkit.plugins.module_utils.dtnkit import Dtnkit, common_spec


def main():
    spec = common_spec()
    spec.update(
        group=dict(type="str", required=True),
        baseline_bps=dict(type="list", elements="float", required=True),
        applied_bps=dict(type="list", elements="float"),
        nic_speeds=dict(type="list", elements="str", default=[]),
        measured_harmful=dict(type="bool", default=False),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    params = module.params
    dtnkit = Dtnkit(module)
    base = []
    for value in params["baseline_bps"]:
        base += ["--baseline", repr(value)]
    if params["applied_bps"] is None:
        args = ["fleet", "campaign", "gate", "--group", params["group"]] + base
        for speed in params["nic_speeds"]:
            args += ["--nic-speed", speed]
        if params["measured_harmful"]:
            args.append("--measured-harmful")
        rc, doc = dtnkit.run(args)
        result = dict(group=doc["group"], verdict="gated" if doc["gated"] else None,
                      applied=False, ratio=None, margin=doc["margin"],
                      baseline_bps=doc["baseline_bps"], applied_bps=[], why=doc["why"])
        module.exit_json(changed=False, gated=doc["gated"], verdict=result["verdict"],
                         why=doc["why"], result=result, gate=doc, dtnkit_version=dtnkit.version)
    args = ["fleet", "campaign", "judge", "--group", params["group"]] + base
    for value in params["applied_bps"]:
        args += ["--applied", repr(value)]
    rc, doc = dtnkit.run(args)
    module.exit_json(changed=False, gated=False, verdict=doc["verdict"], why=doc["why"],
                     result=doc, dtnkit_version=dtnkit.version)


if __name__ == "__main__":
    main()
