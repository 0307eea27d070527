#!/usr/bin/env python3
"""Write the JSON twin of each shipped profile (src/dtnkit/tune/profiles/NAME.json), which
spares an audit the 5 ms of loading tomllib.  Run it after editing a shipped .toml;
tests/tune/test_s18a_profile_twins.py fails until it is run (a stale twin is never used:
profile.py checks its CRC-32 against the TOML's bytes).

    .venv/bin/python dev/profile_twins.py
"""

from __future__ import annotations

import json

from dtnkit.tune.profile import shipped_dir, twin_document


def main() -> int:
    for toml in sorted(shipped_dir().glob("*.toml")):
        twin = toml.with_suffix(".json")
        twin.write_text(json.dumps(twin_document(toml.read_bytes()), indent=1)
                        + "\n")
        print(f"wrote {twin}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
