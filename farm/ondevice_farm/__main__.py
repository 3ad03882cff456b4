from ondevice_farm.cli.main import main

main()
