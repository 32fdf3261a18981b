"""``python -m dnnframe.cli``."""

from . import main

main()
