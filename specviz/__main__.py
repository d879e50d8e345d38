import sys

from specviz.cli.main import main

sys.exit(main())
