"""A worker file that fails while being imported."""

import keepgoing


@keepgoing.task
def never_registered() -> None:
    pass


raise RuntimeError("broken.py refuses to be imported")
