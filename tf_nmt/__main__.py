from tf_nmt.cli import main
import sys
sys.exit(main())
