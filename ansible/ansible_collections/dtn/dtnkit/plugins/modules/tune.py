#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dtnkit maintainers
# Apache License 2.0 (see LICENSE in the dtnkit repository)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tune
short_description: Apply, save or restore a host's tuning with dtnkit
version_added: "0.1.0"
description:
  - C(state=applied) runs C(dtnkit tune apply) (a profile and/or groups); dtnkit saves a
    baseline snapshot first, verifies every write and puts everything back if one fails.
  - C(state=restored) runs C(dtnkit tune restore) (a snapshot id or label; default the
    baseline of the last apply).
  - C(state=saved) runs C(dtnkit tune save) (a new snapshot of every restorable setting).
  - C(changed) is true only when dtnkit wrote something (its JSON lists what it wrote; a
    save always writes a snapshot).
  - Check mode is dtnkit's C(--dry-run) (nothing is written; C(changed) says whether it
    would write); diff mode shows before/after per setting.
  - Fails, naming the managed host, when dtnkit is missing or older than the collection.
options:
  state:
    description: What to do.
    type: str
    choices: [applied, restored, saved]
    default: applied
  profile:
    description: Profile name or path (C(state=applied)).
    type: str
    default: dtn
  groups:
    description: Only these groups (C(state=applied)); all when empty.
    type: list
    elements: str
    default: []
    aliases: [group]
  rtt:
    description: Longest RTT the host must serve (C(state=applied)).
    type: str
    default: 100ms
  speed:
    description: Size speed-dependent items for this link speed (C(state=applied)).
    type: str
  ifaces:
    description: Only these interfaces (C(state=applied)).
    type: list
    elements: str
    default: []
  label:
    description: Label of the baseline (C(applied)) or of the snapshot (C(saved)).
    type: str
  snapshot:
    description: Snapshot id, unique prefix or label to restore (C(state=restored)); default
      the baseline of the last apply.
    type: str
  missing_ok:
    description: With C(state=restored) and no C(snapshot), a host where no baseline was ever
      saved is left alone (C(changed=false)) instead of failing (for a rollback of a fleet).
    type: bool
    default: false
  wait:
    description: Wait this long for another apply or restore's lock, e.g. C(30s).
    type: str
    default: 0s
  state_dir:
    description: dtnkit's state dir (C(--state-dir)), where snapshots live; default dtnkit's
      (C(/var/lib/dtnkit) or C($DTNKIT_STATE_DIR)).
    type: path
extends_documentation_fragment:
  - dtn.dtnkit.common
author:
  - dtnkit maintainers (@dtnkit)
"""

EXAMPLES = r"""
- name: Apply the buffers and congestion groups for a 100 ms path
  dtn.dtnkit.tune:
    groups: [buffers, congestion]
    rtt: 100ms
    label: before-campaign

- name: Put the last baseline back
  dtn.dtnkit.tune:
    state: restored

- name: Save a snapshot
  dtn.dtnkit.tune:
    state: saved
    label: weekly
  register: saved
"""

RETURN = r"""
snapshot:
  description: The snapshot written (C(saved)), the baseline saved before writing (C(applied);
    null when nothing was written) or the snapshot restored (C(restored)).
  returned: success
  type: str
written:
  description: The settings written (or, in check mode, that would be), each with C(key),
    C(group), C(before), C(after) (a sysctl triple as a list of integers).
  returned: success
  type: list
  elements: dict
undecided:
  description: The keys dtnkit could not decide (the audit's unknown items, e.g. buffers on a
    NIC that reports no speed: give C(speed)); the module warns with the command that decides
    them.  The rest was applied as usual.
  returned: when some items could not be decided
  type: list
  elements: str
result:
  description: dtnkit's JSON document as printed.
  returned: success
  type: dict
dtnkit_version:
  description: The dtnkit version found on the host (null when C(check_version) is false).
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dtn.dtnkit.plugins.module_utils.dtnkit import (
    Dtnkit, common_spec, selection_args, selection_spec, settings_diff)


def main():
    spec = common_spec(state_dir=True)
    spec.update(selection_spec())
    spec.update(
        state=dict(type="str", default="applied", choices=["applied", "restored", "saved"]),
        label=dict(type="str"),
        snapshot=dict(type="str"),
        wait=dict(type="str", default="0s"),
        missing_ok=dict(type="bool", default=False),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    params = module.params
    dtnkit = Dtnkit(module)
    state, check = params["state"], module.check_mode
    where = dtnkit.where(state_dir=True)
    if state == "saved":
        if check:
            module.exit_json(changed=True, snapshot=None, written=[], result={},
                             dtnkit_version=dtnkit.version)
        # --NAME=VALUE: a value is never read as another option
        rc, doc = dtnkit.run(["tune", "save", "--label=" + (params["label"] or "ansible")]
                             + where)
        module.exit_json(changed=True, snapshot=doc["id"], written=[], result=doc,
                         dtnkit_version=dtnkit.version)
    if state == "applied":
        args = ["tune", "apply"] + selection_args(params) + where
        if params["label"]:
            args += ["--label=" + params["label"]]
    else:
        if params["missing_ok"] and not params["snapshot"]:
            rc, listing = dtnkit.run(["tune", "list"] + where)
            if not any(row.get("last_baseline") for row in listing):
                module.exit_json(changed=False, snapshot=None, written=[], result={},
                                 msg="no baseline saved on this host: nothing to restore",
                                 dtnkit_version=dtnkit.version)
        args = ["tune", "restore"] + where
    if check:
        args.append("--dry-run")
    else:
        args += ["--wait=" + params["wait"]]
    # 16: done, but some items could not be decided (no link speed: give speed=...)
    rc, doc = dtnkit.run(args, ok=(0, 16) if check else (0, 4, 5, 16),
                         operands=[params["snapshot"]] if state == "restored"
                         and params["snapshot"] else [])
    written = doc["plan"] if check else doc.get("applied", [])
    snapshot = doc.get("snapshot") if state == "restored" else doc.get("baseline")
    result = dict(changed=bool(written), snapshot=snapshot, written=written, result=doc,
                  dtnkit_version=dtnkit.version)
    if module._diff:
        result["diff"] = settings_diff(written, "tuning of %s" % dtnkit.host)
    if rc == 16:
        result["undecided"] = [u["key"] for u in doc.get("undecided") or []]
        module.warn("dtnkit could not decide %d items (%s): %s"
                    % (len(result["undecided"]), ", ".join(result["undecided"][:5]),
                       doc.get("decide") or "see result.undecided"))
    elif rc != 0:
        err = doc.get("error") or {}
        dtnkit.fail("`tune %s` failed at %s and %s: %s"
                    % ("apply" if state == "applied" else "restore",
                       (doc.get("failed") or {}).get("key", "a setting"),
                       "put back what it had written" if rc == 4
                       else "could NOT put back everything (see result.rollback_errors)",
                       "; ".join(x for x in (err.get("what"), err.get("why")) if x)),
                    **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
