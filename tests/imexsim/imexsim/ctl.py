"""Simulated `nvidia-imex-ctl`: -q (local daemon state) and -N (whole domain, text or JSON).

Like the real tool, -N reads the node list of the local configuration and asks every listed
node's command service (IMEX_CMD_PORT of the local config) for its state, version, host name
and connection row; a node whose command service cannot be reached is UNAVAILABLE with an
empty version and an all-`I` row, whatever its peer links look like. All messages go to stdout
(INFERRED: DCGM finds "Failed to read node configuration file" in the captured output).
"""
from __future__ import annotations

import datetime
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from . import ctlformat, testbed, wire
from .imexcfg import DEFAULT_CONFIG_PATH, ImexConfig, find_local_node, read_node_entries
from .vendorlog import ctl_timestamp

USAGE = """Usage: nvidia-imex-ctl [-i <IP> <PORT>|-u <unix domain socket path>|-c <nvidia-imex config.cfg path>] <-N|-q> [-j][-H]
Where:
       -i <IP> <PORT>: Connect to the IMEX daemon's control service at the specified ip address and port.
       -u <unix domain socket path>: Connect to the IMEX daemon's control service at the specified unix domain socket path.
       -c <nvidia-imex config path>: Path to nvidia-imex configuration file.  Default value is /etc/nvidia-imex/config.cfg
NOTE:  If none of -i, -u, -c are provided, -c is assumed with default value.
       -N: Gets the full status of the entire IMEX domain.  Requires config file (default or via -c)
       -H: Show hostname alongside node IP, only works with -N
       -j: Output of the -N command will be in JSON, rather than formatted.
       -q: Query the status of the IMEX daemon once and return
NOTE: only one of -i, -u, or -c can be specified
"""
# Text printed when the local daemon's command service does not answer (gRPC UNAVAILABLE = 14).
QUERY_FAILED = "Query Status returned error code: 14"
# Forces the pre-release 570.00 text layout regardless of the installed version.
LAYOUT_ENV = "IMEXSIM_CTL_LAYOUT"


class UsageError(Exception):
    pass


class Options:  # pylint: disable=too-many-instance-attributes
    def __init__(self, argv: list[str]):
        self.config_path: str | None = None
        self.address: tuple[str, int] | None = None
        self.unix_path: str | None = None
        self.query = False
        self.domain = False
        self.json = False
        self.hostnames = False
        self._parse(list(argv))
        targets = [self.config_path is not None, self.address is not None, self.unix_path is not None]
        if sum(targets) > 1 or self.query == self.domain or (self.domain and (self.address or self.unix_path)):
            raise UsageError()
        if self.config_path is None:
            self.config_path = DEFAULT_CONFIG_PATH

    def _parse(self, args: list[str]) -> None:
        flags = {"-q": "query", "-N": "domain", "-j": "json", "-H": "hostnames"}
        while args:
            arg = args.pop(0)
            if arg in flags:
                setattr(self, flags[arg], True)
            elif arg == "-c" and args:
                self.config_path = args.pop(0)
            elif arg == "-u" and args:
                self.unix_path = args.pop(0)
            elif arg.startswith("--u="):
                self.unix_path = arg.partition("=")[2]
            elif arg == "-i" and len(args) >= 2 and args[1].isdigit():
                self.address = (args.pop(0), int(args.pop(0)))
            else:
                raise UsageError()  # includes -h and --help, which print the usage with status 1


def _load_config(path: str) -> ImexConfig | None:
    try:
        return ImexConfig.load(path)
    except OSError:
        print(f"Unable to open configuration file at {path}")
        print(USAGE, end="")
        return None


def _local_target(config: ImexConfig) -> dict:
    """Where the local daemon's command service listens according to config.cfg."""
    if config.get("IMEX_CMD_PORT").isdigit():
        return {"host": config.get("IMEX_CMD_BIND_INTERFACE_IP") or "127.0.0.1", "port": int(config.get("IMEX_CMD_PORT"))}
    return {"unix_path": config.get("IMEX_CMD_UNIX_DOMAIN_PATH")}


def query(options: Options) -> int:
    if options.address is not None:
        target = {"host": options.address[0], "port": options.address[1]}
    elif options.unix_path is not None:
        target = {"unix_path": options.unix_path}
    else:
        config = _load_config(options.config_path)
        if config is None:
            return 1
        target = _local_target(config)
    if not target.get("unix_path") and not target.get("host"):
        print(QUERY_FAILED)
        return 1
    try:
        reply = wire.query_status(**target)
    except (OSError, ValueError):
        print(QUERY_FAILED)
        return 1
    print(reply.get("state", ""))
    return 0


def _ask_node(index: int, host: str, port: int | None, columns: int) -> ctlformat.NodeReport:
    unreachable = ctlformat.NodeReport(index=index, host=host, reachable=False, cells=[wire.INVALID] * columns)
    if port is None:
        return unreachable
    try:
        reply = wire.query_status(host=host, port=port)
    except (OSError, ValueError):
        return unreachable
    connections = reply.get("connections") or {}
    return ctlformat.NodeReport(
        index=index,
        host=host,
        reachable=True,
        status=str(reply.get("state", "")),
        version=str(reply.get("version", "")),
        hostname=str(reply.get("hostname", "")),
        # A column the node has no opinion on (its own list is shorter) has no status: I.
        cells=[str(connections.get(str(column), wire.INVALID)) for column in range(columns)],
    )


def domain_status(options: Options) -> int:
    config = _load_config(options.config_path)
    if config is None:
        return 1
    nodes_path = config.get("IMEX_NODE_CONFIG_FILE")
    try:
        entries = read_node_entries(nodes_path)
    except OSError as exc:
        print(f"Failed to read node configuration file {nodes_path}: {exc.strerror}")
        return 1
    port = int(config.get("IMEX_CMD_PORT")) if config.get("IMEX_CMD_PORT").isdigit() else None
    with ThreadPoolExecutor(max_workers=max(1, len(entries))) as pool:
        futures = [pool.submit(_ask_node, index, entry, port, len(entries)) for index, entry in enumerate(entries)]
        nodes = [future.result() for future in futures]
    local = find_local_node(entries, config.get("BIND_INTERFACE_IP"))
    report = ctlformat.DomainReport(
        nodes=nodes,
        timestamp=ctl_timestamp(datetime.datetime.now()),
        local_index=local[0] if local else None,
    )
    version = testbed.imex_version()
    if options.json:
        release_580 = testbed.version_tuple(version)[:1] >= (580,)
        print(ctlformat.render_json(report, with_hostname=release_580, sparse=release_580), end="")
    else:
        legacy = version.startswith("570.00") or os.environ.get(LAYOUT_ENV) == ctlformat.LAYOUT_570_00
        layout = ctlformat.LAYOUT_570_00 if legacy else ctlformat.LAYOUT_570_172
        print(ctlformat.render_text(report, layout=layout, hostnames=options.hostnames), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        options = Options(sys.argv[1:] if argv is None else argv)
    except UsageError:
        print(USAGE, end="")
        return 1
    try:
        hang = testbed.faults().get("ctl_hang")
    except testbed.KnobError as exc:
        print(f"imexsim: {exc}")
        return 1
    if hang:
        # Test knob: behave like a ctl stuck on an unresponsive daemon, so callers' timeouts run.
        while True:
            time.sleep(3600)
    return domain_status(options) if options.domain else query(options)


if __name__ == "__main__":
    sys.exit(main())
