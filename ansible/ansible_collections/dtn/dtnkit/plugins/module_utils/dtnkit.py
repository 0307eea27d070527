# -*- coding: utf-8 -*-
# Copyright: dtnkit maintainers
# Apache License 2.0 (see LICENSE in the dtnkit repository)
"""Shared code of the dtn.dtnkit modules: find dtnkit on the managed host, check that it is
not older than the collection, and run it with an argv list (never a shell), reading its
``--format json`` output.  Every failure names the managed host (its hostname: a module cannot
see the inventory name; Ansible's own failure line names the inventory host)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools
import json
import os
import re
import socket

#: the collection's version: the same as dtnkit's (galaxy.yml; a test checks all three match);
#: the modules refuse an older dtnkit
COLLECTION_VERSION = "0.1.0"

#: exit statuses of dtnkit that are answers, not failures, per command
DRIFT = 3


def common_spec(state_dir=False, db=False):
    """The options every module takes: ``dtnkit_path`` and ``check_version``, and
    ``state_dir``/``db`` where the commands it runs take them."""
    spec = dict(dtnkit_path=dict(type="str", default="dtnkit"),
                check_version=dict(type="bool", default=True))
    if state_dir:
        spec["state_dir"] = dict(type="path")
    if db:
        spec["db"] = dict(type="str")
    return spec


def selection_spec():
    """What `dtnkit tune audit|apply` selects: profile, groups, rtt, speed, interfaces."""
    return dict(
        profile=dict(type="str", default="dtn"),
        groups=dict(type="list", elements="str", default=[], aliases=["group"]),
        rtt=dict(type="str", default="100ms"),
        speed=dict(type="str"),
        ifaces=dict(type="list", elements="str", default=[]),
    )


def selection_args(params):
    args = ["--profile", params["profile"], "--rtt", params["rtt"]]
    for group in params["groups"]:
        args += ["--group", group]
    for iface in params["ifaces"]:
        args += ["--iface", iface]
    if params.get("speed"):
        args += ["--speed", params["speed"]]
    return args


def parse_version(text):
    match = re.search(r"version (\d+(?:\.\d+)*)", text or "")
    if not match:
        return None
    return tuple(int(x) for x in match.group(1).split("."))


class Dtnkit(object):
    """dtnkit on the managed host, found and version-checked once per module run (unless
    ``check_version`` is false: a play that checked this dtnkit on this host already, as the
    role pair_experiment does at its first step, saves one dtnkit start per task)."""

    def __init__(self, module):
        self.module = module
        self.host = socket.gethostname()
        self.path = self._find(module.params["dtnkit_path"])
        self.version = self._check_version() if module.params["check_version"] else None

    def fail(self, msg, **extra):
        self.module.fail_json(msg="dtnkit on host %s: %s" % (self.host, msg),
                              remote_host=self.host, **extra)

    def _find(self, path):
        if os.sep in path:
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                self.fail("%s is not an executable file; install dtnkit (role "
                          "dtn.dtnkit.install) or fix dtnkit_path" % path)
            return path
        found = self.module.get_bin_path(path)
        if not found:
            self.fail("no %s on PATH; install dtnkit (role dtn.dtnkit.install) or give "
                      "dtnkit_path" % path)
        return found

    def _check_version(self):
        rc, out, err = self.module.run_command([self.path, "--version"])
        have = parse_version(out)
        if rc != 0 or have is None:
            self.fail("%s --version did not print its version (exit %d): %s"
                      % (self.path, rc, (err or out).strip()[-300:]))
        need = parse_version("version " + COLLECTION_VERSION)
        if have < need:
            self.fail("dtnkit %s at %s is older than this collection needs (dtn.dtnkit %s "
                      "needs dtnkit >= %s); upgrade it (role dtn.dtnkit.install)"
                      % (".".join(map(str, have)), self.path, COLLECTION_VERSION,
                         COLLECTION_VERSION))
        return ".".join(map(str, have))

    def where(self, state_dir=False, db=False):
        """``--state-dir``/``--db`` from the module's options, when given."""
        args = []
        params = self.module.params
        if state_dir and params.get("state_dir"):
            args += ["--state-dir", params["state_dir"]]
        if db and params.get("db"):
            args += ["--db", params["db"]]
        return args

    def run(self, args, ok=(0,), operands=(), env=None):
        """Run ``dtnkit ARGS --format json [-- OPERANDS]``; return (exit status, document).
        OPERANDS (a snapshot id, a label) come after ``--``, so that a value starting with
        ``-`` is never read as an option.  An exit status outside ``ok`` fails the module
        with dtnkit's own error line.  ENV: variables for dtnkit (a token: never in argv)."""
        argv = [self.path] + list(args) + ["--format", "json"]
        if operands:
            argv += ["--"] + list(operands)
        rc, out, err = self.module.run_command(argv, environ_update=env or {})
        self.stdout = out
        command = " ".join(itertools.takewhile(lambda a: not a.startswith("-"), argv[1:]))
        try:
            doc = json.loads(out) if out.strip() else None
        except ValueError:
            doc = None
        if rc not in ok:
            lines = [line for line in (err or "").splitlines() if line.strip()]
            said = [line for line in lines if line.startswith("dtnkit: error: ")]
            why = (said[-1][len("dtnkit: error: "):] if said
                   else (lines[-1] if lines else "no message"))
            self.fail("`%s` failed (exit %d): %s" % (command, rc, why),
                      rc=rc, cmd=argv, stderr=err, document=doc)
        if doc is None:
            self.fail("`%s` printed no JSON" % command, rc=rc, cmd=argv,
                      stdout=out[-2000:], stderr=err)
        return rc, doc


def settings_diff(steps, header):
    """Ansible's diff (before/after text, one line per setting) of dtnkit plan steps."""
    def shown(value):  # a sysctl triple is a list of integers: as sysctl prints it
        if isinstance(value, list) and all(isinstance(v, int) for v in value):
            return " ".join(str(v) for v in value)
        return value

    def text(side):
        return "".join("%s = %s\n" % (s["key"], shown(s.get(side))) for s in
                       sorted(steps, key=lambda s: s["key"]))
    return dict(before=text("before"), after=text("after"),
                before_header="%s (before)" % header, after_header="%s (after)" % header)
