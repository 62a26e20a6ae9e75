import sys

from secure_fedgraph.cli import main

sys.exit(main())
