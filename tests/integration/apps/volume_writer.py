"""A plain process that commits ``count`` versions to a volume, one file per write.

Run as ``python volume_writer.py STORE_URL VOLUME WRITER COUNT``; it first waits
for the marker ``go`` (in ``KG_TEST_DIR``) so that several writers start together.
"""

from __future__ import annotations

import sys

from kg_effects import wait_for_marker

from keepgoing import Volume


def main(url: str, name: str, writer: str, count: int) -> None:
    memory = Volume(name, store=url)
    wait_for_marker("go")
    for i in range(count):
        memory.put_file(f"{writer}/{i:03d}.txt", f"{writer} wrote {i}\n")
    print(f"{writer} done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
