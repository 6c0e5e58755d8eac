from personalign._launch import main

main()
