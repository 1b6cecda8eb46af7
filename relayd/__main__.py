"""``python -m relayd``: the same as the ``relayd`` console script."""

from relayd.cli.app import main

main()
