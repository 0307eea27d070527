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
notes:
  - A module cannot see the inventory name; failure messages name the managed host by its
    hostname and Ansible's failure line names the inventory host.
"""
