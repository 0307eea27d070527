#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dtnkit maintainers
# Apache License 2.0 (see LICENSE in the dtnkit repository)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: probe
short_description: A network probe between two inventory hosts with dtnkit (iperf3)
version_added: "0.1.0"
description:
  - A module runs on one host, so a probe between hosts A and B is three tasks, the last one
    in an C(always) section so the server is stopped even when the probe fails
    (see EXAMPLES and the role C(dtn.dtnkit.pair_experiment)).
  - C(state=server_started) on B (C(delegate_to)) runs C(dtnkit fleet campaign server start),
    C(iperf3 -s) detached, its PID file under the state dir (C(STATE/servers/iperf3-PORT.pid));
    one already running on that port for the same address and token is reused.  It listens
    on C(bind) only, lets in only clients holding C(token) (iperf3's RSA authentication: a
    fresh key pair, the public key returned as C(server.public_key)), and runs as nobody.
  - C(state=measured) on A runs C(dtnkit probe net --peer ADDRESS --server-key KEY) with the
    same C(token) and that C(server_key), and returns dtnkit's probe JSON; the result is stored
    in the results store (C(db)).
  - C(state=server_stopped) on B runs C(dtnkit fleet campaign server stop); the server is stopped by
    the PID in its PID file (only if that PID is still an iperf3).
  - A probe changes no setting, so C(changed) is false for C(measured); check mode skips the
    measurement (C(probe) is null).
options:
  state:
    description: Which step.
    type: str
    choices: [measured, server_started, server_stopped]
    default: measured
  peer:
    description: Address (or name) of the host running the server (C(state=measured)).
    type: str
  port:
    description: The server's TCP port.
    type: int
    default: 5201
  streams:
    description: Parallel streams (iperf3 -P).
    type: int
    default: 1
  duration:
    description: How long to send, e.g. C(10s) or C(2m) (iperf3 -t; a bare number is seconds).
    type: str
    default: 10s
  reverse:
    description: The peer sends (iperf3 -R).
    type: bool
    default: false
  bind:
    description: The address the server listens on (C(state=server_started)): the one the
      client probes.
    type: str
  token:
    description: The campaign's token (C(server_started), C(measured)): the server lets in
      only clients that hold it.  Passed to dtnkit in its environment, never on a command line.
    type: str
  server_key:
    description: The server's RSA public key, PEM (C(state=measured)): C(server.public_key)
      of the C(server_started) task.
    type: str
  state_dir:
    description: dtnkit's state dir on the host, where the server's PID file lives.
    type: path
  db:
    description: The results store (dtnkit C(--db)), e.g. a C(postgresql://) URL.
    type: str
extends_documentation_fragment:
  - dtn.dtnkit.common
author:
  - dtnkit maintainers (@dtnkit)
"""

EXAMPLES = r"""
- name: Probe from dtn-a to dtn-b
  block:
    - name: Start the server on dtn-b
      dtn.dtnkit.probe:
        state: server_started
        port: 5201
        bind: 192.0.2.12
        token: "{{ campaign_token }}"
      delegate_to: dtn-b
      register: server

    - name: Probe from dtn-a
      dtn.dtnkit.probe:
        peer: 192.0.2.12
        port: 5201
        duration: 10s
        token: "{{ campaign_token }}"
        server_key: "{{ server.server.public_key }}"
      register: probe
  always:
    - name: Stop the server on dtn-b
      dtn.dtnkit.probe:
        state: server_stopped
        port: 5201
      delegate_to: dtn-b
"""

RETURN = r"""
probe:
  description: dtnkit's probe document (C(dtnkit probe net --format json)); null in check mode.
  returned: state=measured
  type: dict
throughput_bps:
  description: The probe's throughput in bit/s.
  returned: state=measured, not in check mode
  type: float
server:
  description: C(dtnkit fleet campaign server start|stop)'s document (pid, port, pid_file, started
    or stopped).
  returned: state=server_started or server_stopped
  type: dict
dtnkit_version:
  description: The dtnkit version found on the host (null when C(check_version) is false).
  returned: success
  type: str
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dtn.dtnkit.plugins.module_utils.dtnkit import Dtnkit, common_spec


def main():
    spec = common_spec(state_dir=True, db=True)
    spec.update(
        state=dict(type="str", default="measured",
                   choices=["measured", "server_started", "server_stopped"]),
        peer=dict(type="str"),
        port=dict(type="int", default=5201),
        streams=dict(type="int", default=1),
        duration=dict(type="str", default="10s"),
        reverse=dict(type="bool", default=False),
        bind=dict(type="str"),
        token=dict(type="str", no_log=True),
        server_key=dict(type="str", no_log=False),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True,
                           required_if=[("state", "measured", ["peer", "token", "server_key"]),
                                        ("state", "server_started", ["bind", "token"])])
    params = module.params
    dtnkit = Dtnkit(module)
    state = params["state"]
    if state != "measured":
        verb = "start" if state == "server_started" else "stop"
        if module.check_mode:
            module.exit_json(changed=True, server=None, dtnkit_version=dtnkit.version)
        args = ["fleet", "campaign", "server", verb, "--port=%d" % params["port"]]
        if verb == "start":
            args.append("--bind=" + params["bind"])
        rc, doc = dtnkit.run(args + dtnkit.where(state_dir=True),
                             env={"DTNKIT_TOKEN": params["token"] or ""})
        module.exit_json(changed=bool(doc.get("started") or doc.get("stopped")), server=doc,
                         dtnkit_version=dtnkit.version)
    if module.check_mode:
        module.exit_json(changed=False, probe=None, dtnkit_version=dtnkit.version)
    with tempfile.NamedTemporaryFile("w", prefix="dtnkit-server-", suffix=".pub") as key:
        key.write(params["server_key"])
        key.flush()
        args = ["probe", "net", "--peer=" + params["peer"], "--port=%d" % params["port"],
                "--streams=%d" % params["streams"], "--duration=" + params["duration"],
                "--server-key=" + os.path.abspath(key.name)]
        if params["reverse"]:
            args.append("--reverse")
        rc, doc = dtnkit.run(args + dtnkit.where(db=True),
                             env={"DTNKIT_TOKEN": params["token"]})
    module.exit_json(changed=False, probe=doc,
                     throughput_bps=float((doc.get("summary") or {}).get("throughput_bps") or 0),
                     dtnkit_version=dtnkit.version)


if __name__ == "__main__":
    main()
