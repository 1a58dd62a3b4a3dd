"""`python -m nsysreport` runs the command line."""

from nsysreport.cli import main

main()
