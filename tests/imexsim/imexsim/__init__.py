"""IMEX simulator: stand-ins for nvidia-imex, nvidia-imex-ctl, nvidia-smi and the kernel driver.

Test equipment for rackscale.imex. Installed into simulated trays by ../install-into; the
collection itself never imports this package.
"""
