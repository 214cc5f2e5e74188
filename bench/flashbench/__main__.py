import sys

from .supervisor import main

sys.exit(main())
