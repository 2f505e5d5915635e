import os
import sys

from lab.cli import main

try:
    status = main()
    sys.stdout.flush()
except BrokenPipeError:
    # The reader went away (`python -m lab demo | head`): stop quietly, as Unix tools do, and keep Python from
    # reporting the failed flush of stdout at exit.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    status = 1
sys.exit(status)
