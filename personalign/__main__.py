from personalign.cli import main

main()
