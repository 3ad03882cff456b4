"""The iOS agent: iPhones as farm units, over pymobiledevice3, running CoreML in FarmRunner.

Read in the order a job flows:

    provider.py     how a phone is reached: ConnectionProvider (usbmux, lockdown, tunneld)
    bridge.py       the one async -> sync boundary, and pymobiledevice3 errors -> FarmErrors
    link.py         one phone as the services see it
    inventory.py    lockdown values -> unit properties (ProductType, iOS version, ...)
    install.py      FarmRunner installed once, upgraded when its version changes
    container.py    pushes into the app container, cached by hash, atomic
    contract.py     the job and result files (schemas in runner_contract/)
    job.py          write the job, launch, wait for the result, pull the outputs
    battery.py      the battery gauge over the diagnostics relay -> energy per inference
    sustained.py    the result's sustained phase -> SustainedTrace (thermal state per window)
    agent.py        IosAgent, the DeviceAgent for platform "ios"

    fakes.py, standin_app.py   a fake phone at the service boundary, and a host stand-in
                               for the app, for tests and demos without an iPhone
    standin_mlprogram.py, standin_phases.py   the stand-in's ML Program run and its timed,
                               loaded and sustained phases

Nothing outside this package imports pymobiledevice3.
"""
