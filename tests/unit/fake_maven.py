"""A stand-in `mvn` for unit tests of the jar cache: no network, no local repository, no Maven.

It records each POM it is given in a log (FAKE_MAVEN_LOG), then writes one jar into the
`-DoutputDirectory` as copy-dependencies would, or, with FAKE_MAVEN_FAIL set, prints the error
line Maven prints when Central cannot be reached and exits 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPT = """#!{python}
import os, pathlib, sys
arguments = sys.argv[1:]
with open(os.environ["FAKE_MAVEN_LOG"], "a") as log:
    log.write(pathlib.Path(arguments[arguments.index("-f") + 1]).read_text() + "\\n")
if os.environ.get("FAKE_MAVEN_FAIL"):
    print("[ERROR] Could not transfer artifact from/to central-only: repo1.maven.org: Temporary failure in name resolution")
    sys.exit(1)
output = pathlib.Path(next(a for a in arguments if a.startswith("-DoutputDirectory=")).split("=", 1)[1])
output.mkdir(parents=True)
(output / "fake-1.0.jar").write_bytes(b"PK")
"""


def fake_maven(folder: Path) -> tuple[Path, Path]:
    """Write the stand-in `mvn` into `folder`; return the folder (for PATH) and the log of the POMs it is given."""
    folder.mkdir(parents=True, exist_ok=True)
    mvn = folder / "mvn"
    mvn.write_text(SCRIPT.format(python=sys.executable))
    mvn.chmod(0o755)
    return folder, folder / "calls.log"
