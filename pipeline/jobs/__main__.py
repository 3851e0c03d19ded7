import sys

from ferrymq.pipeline.jobs import main

sys.exit(main())
