"""``keepgoing demo``: the support-digest agent on a real stack, its recorded run, the use cases."""
