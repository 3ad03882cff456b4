from farm.cli.main import main

main()
