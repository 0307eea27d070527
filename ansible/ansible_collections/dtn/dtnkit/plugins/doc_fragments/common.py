# -*- coding: utf-8 -*-
# Copyright: dtnkit maintainers
# Apache License 2.0 (see LICENSE in the dtnkit repository)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """What every dtn.dtnkit module documents alike: how it finds dtnkit, and how it names the
    host when it fails (used as C(extends_documentation_fragment: dtn.dtnkit.common))."""

    DOCUMENTATION = r"""
options:
  dtnkit_path:
    description: The dtnkit command on the managed host (a name looked up on PATH, or a path).
    type: str
    default: dtnkit
  check_version:
    description:
      - Run C(dtnkit --version) first and fail when dtnkit is older than the collection.
      - Turn it off only for a task whose play already checked the same C(dtnkit_path) on the
        same host (the role C(pair_experiment) checks at its first step); it saves one dtnkit
        start per task. C(dtnkit_version) is then null.
    type: bool
    default: true
notes:
  - A module cannot see the inventory name; failure messages name the managed host by its
    hostname and Ansible's failure line names the inventory host.
"""
