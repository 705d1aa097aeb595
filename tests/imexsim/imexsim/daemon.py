"""Simulated `nvidia-imex` daemon.

Reads config.cfg and the node list once at start, identifies its own node index, listens on
SERVER_PORT for peers and on the command service for nvidia-imex-ctl, and keeps an outgoing
connection to every node of the list (itself included, as the real daemon does). The per-peer
connection state it reports (N, C, R, D, !V!, !M!) comes from what actually happens on those
connections: the hello exchange compares versions and node-map hashes, heartbeats detect loss,
and a peer's clean shutdown is announced on the wire.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import sys
import time
import uuid

from . import testbed, wire
from .imexcfg import (
    DEFAULT_CONFIG_PATH,
    ConfigError,
    ImexConfig,
    find_local_node,
    interface_name,
    is_ip_literal,
    node_map_hash,
    read_node_entries,
    resolve,
)
from .tls import AuthConfigError, build_contexts
from .vendorlog import VendorLog

HEARTBEAT_INTERVAL_S = 1.0
# No message from a connected peer for this long means the connection is lost (peer frozen,
# network cut); a closed socket is noticed at once.
LOSS_TIMEOUT_S = 3.0
# Server side: a client that stopped sending pings for this long is gone.
PEER_IDLE_TIMEOUT_S = 2 * LOSS_TIMEOUT_S
# Covers TCP connect, the TLS handshake and the hello reply.
CONNECT_TIMEOUT_S = 2.0
CMD_REQUEST_TIMEOUT_S = 5.0
# The real daemon retries an unreachable peer with exponential backoff (15, 31, 62, 125 s ...,
# reference §4 and §8). By default the simulator deliberately retries at a short fixed interval so
# that a simulated rack converges in seconds (half a second: daemons of a domain started together
# find each other within about one wait, and every restart of the tests' beds waits for that); faults.json "reconnect_interval_s" overrides it, and
# "reconnect_backoff_s" (a list of waits, e.g. REAL_BACKOFF_S) makes it back off as the real one.
DEFAULT_RECONNECT_INTERVAL_S = 0.5
REAL_BACKOFF_S = (15, 31, 62, 125)
# signals.html: "SIGUSR1 will only be processed once every 5 seconds."
SIGUSR1_MIN_INTERVAL_S = 5.0
GRACE_CHECK_INTERVAL_S = 0.25
SHUTDOWN_NOTICE_TIMEOUT_S = 1.0
LISTEN_BACKLOG = 128
# Test equipment's own record of the daemon's lifetime (not a vendor file): one JSON line per
# instance that started serving and per stop it was asked for, so that a test can tell when each
# daemon of a domain ran. In a tray (the knobs at their default place) it is EVENTS_PATH;
# host-side self-tests write it only where IMEXSIM_EVENTS_FILE points.
EVENTS_ENV = "IMEXSIM_EVENTS_FILE"
EVENTS_PATH = "/var/lib/imexsim/daemon-events.jsonl"

USAGE = "Usage: nvidia-imex [-c <config file path>] [-p|--port <port>] [--version]\n"

# Link outcomes, as seen by the loop that owns one outgoing connection.
FAILED = "failed"      # never got as far as a hello
LOST = "lost"          # was up, then closed or silent
SHUTDOWN = "shutdown"  # the peer announced a clean shutdown
RESTART = "restart"    # closed by ourselves for SIGUSR1


class UsageError(Exception):
    pass


class StartupError(Exception):
    """A condition that makes the daemon exit with status 1 before serving."""


class Options:
    def __init__(self, argv: list[str]):
        self.config_path = DEFAULT_CONFIG_PATH
        self.port: int | None = None
        self.show_version = False
        args = list(argv)
        while args:
            arg = args.pop(0)
            if arg == "--version":
                self.show_version = True
            elif arg == "-c" and args:
                self.config_path = args.pop(0)
            elif arg in ("-p", "--port") and args:
                self.port = self._port(args.pop(0))
            elif arg.startswith("--port="):
                self.port = self._port(arg.partition("=")[2])
            else:
                raise UsageError(f"Unrecognized or incomplete option: {arg}")

    @staticmethod
    def _port(text: str) -> int:
        if not text.isdigit() or int(text) > 65535:
            raise UsageError(f"Invalid port: {text}")
        return int(text)


class PeerLink:  # pylint: disable=too-many-instance-attributes
    """This node's view of its connection to one node of the list (one matrix cell)."""

    def __init__(self, index: int, entry: str, address: str | None):
        self.index = index
        self.entry = entry
        # Where the entry pointed when it was last resolved (at start, at SIGUSR1); None: it did not.
        self.address = address
        self.resolve_requested = False
        # Waits since the last good connection (or SIGUSR1): the position in the backoff schedule.
        self.waits = 0
        self.last_wait: float | None = None
        self.state = wire.NEVER_CONNECTED
        self.peer_instance: str | None = None
        self.lost_at: float | None = None
        self.last_failure = ""
        self.writer: asyncio.StreamWriter | None = None
        self.restart_requested = False
        self.wake = asyncio.Event()

    def describe(self) -> str:
        # The vendor names a node by its node-list entry, host names included (reference §1.4:
        # "Connection established to node 1 with address imex-vm-2.imex-service...").
        return f"node {self.index} with address {self.entry}"


async def read_message(reader: asyncio.StreamReader, seconds: float) -> dict | None:
    """Next message, None at end of stream or on garbage; TimeoutError after SECONDS.

    asyncio.timeout rather than asyncio.wait_for: on Python 3.11 wait_for can swallow a
    cancellation that races with completion, which kept shutting-down daemons alive.
    """
    async with asyncio.timeout(seconds):
        line = await reader.readline()
    return wire.decode(line)


def listening_tcp_socket(address: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # A restarted daemon must get its port back while old connections sit in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def listening_unix_socket(path: str) -> socket.socket:
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)  # left behind by a daemon that was killed
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class Daemon:  # pylint: disable=too-many-instance-attributes
    """One simulated IMEX daemon; built by prepare() before any fork, run by serve()."""

    def __init__(self, config: ImexConfig, options: Options, log: VendorLog):
        self.config = config
        self.log = log
        self.version = testbed.imex_version()
        self.state = "INITIALIZING"
        self.instance = uuid.uuid4().hex
        self.hostname = socket.gethostname()
        self.port = options.port if options.port is not None else config.get_int("SERVER_PORT")
        self.grace_s = config.get_int("IMEX_NODE_DISCONNECTED_GRACE_TIME")
        self.entries: list[str] = []
        self.index = -1
        self.bind_address = ""
        self.map_hash = ""
        self.reconnect_interval_s = DEFAULT_RECONNECT_INTERVAL_S
        self.backoff_s: tuple[float, ...] = (DEFAULT_RECONNECT_INTERVAL_S,)
        self.schedule_problem = ""
        self.server_tls = None
        self.client_tls = None
        # The server credentials each new handshake uses: those loaded at start, then at each SIGUSR1.
        self.active_server_tls = None
        self.tls_loaded_at: float | None = None
        self.tls_reloads = 0
        self.peer_socket: socket.socket | None = None
        self.cmd_tcp_socket: socket.socket | None = None
        self.cmd_unix_socket: socket.socket | None = None
        self.links: list[PeerLink] = []
        self.server_writers: set[asyncio.StreamWriter] = set()
        self.last_sigusr1 = -SIGUSR1_MIN_INTERVAL_S
        self.stop_requested: asyncio.Event | None = None
        self.stopping = False

    # ----------------------------------------------------------------- start-up (pre-fork)

    def prepare(self) -> None:
        """Everything that can make the daemon fail to start; raises StartupError."""
        try:
            faults = testbed.faults()
        except testbed.KnobError as exc:
            raise StartupError(str(exc)) from exc
        interval = faults.get("reconnect_interval_s", DEFAULT_RECONNECT_INTERVAL_S)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise StartupError(f"faults.json reconnect_interval_s must be a positive number, not {interval!r}")
        self.reconnect_interval_s = float(interval)
        try:
            self.backoff_s = backoff_schedule(faults, self.reconnect_interval_s)
        except ValueError as exc:
            raise StartupError(str(exc)) from exc
        self._log_configuration()
        self._identify_node()
        self.log.info("nvidia-imex persistence file /var/run/nvidia-imex/persist.dat does not exist.  Assuming no previous importers.")
        if faults.get("fail_start"):
            raise StartupError("NvGpu Library version does not match GPU Driver version (simulated by faults.json fail_start)")
        if testbed.driver_version() != self.version:
            # The real daemon checks the loaded driver stack at start and aborts when it does not match.
            raise StartupError("NvGpu Library version does not match GPU Driver version")
        self.log.info("NvGpu Library version matched with GPU Driver version")
        try:
            self.server_tls, self.client_tls = build_contexts(self.config)
        except AuthConfigError as exc:
            raise StartupError(f"Authentication and encryption setup failed, cannot initialize: {exc}") from exc
        if self.server_tls is not None:
            self.active_server_tls = self.server_tls
            self.tls_loaded_at = time.time()
            # The listener keeps the context it was started with; each handshake switches to the
            # credentials loaded last, so that a SIGUSR1 reload needs no new listener.
            self.server_tls.sni_callback = self._use_current_server_credentials
        self._bind_listeners()

    def _log_configuration(self) -> None:
        get = self.config.get
        for line in (
            f"IMEX version {self.version} is running with the following configuration options:",
            f"Logging level = {get('LOG_LEVEL')}",
            f"Logging file name/path = {get('LOG_FILE_NAME')}",
            f"Append to log file = {get('LOG_APPEND_TO_LOG')}",
            f"Max Log file size = {get('LOG_FILE_MAX_SIZE')} (MBs)",
            f"Use Syslog file = {get('LOG_USE_SYSLOG')}",
            f"Authentication and Encryption enabled = {get('IMEX_ENABLE_AUTH_ENCRYPTION')}",
            f"IMEX Library communication bind interface = {get('BIND_INTERFACE_IP')}",
            f"IMEX library communication bind port = {self.port}",
        ):
            self.log.info(line)

    def _identify_node(self) -> None:
        path = self.config.get("IMEX_NODE_CONFIG_FILE")
        try:
            self.entries = read_node_entries(path)
        except OSError as exc:
            raise StartupError(f"Failed to read node configuration file {path}: {exc.strerror}") from exc
        # Reference §1.4 (580.159.04, 590.48.01): one line per entry that is not an address, at
        # start, after the configuration lines and before the node is identified.
        for entry in self.entries:
            if not is_ip_literal(entry):
                self.log.info(f"Treating node config entry '{entry}' as a host name.")
        found = find_local_node(self.entries, self.config.get("BIND_INTERFACE_IP"))
        if found is None:
            raise StartupError(f"No matching network interface found for any IP addresses in the node configuration file {path}.")
        self.index, self.bind_address = found
        entry = self.entries[self.index]
        if is_ip_literal(entry):
            self.log.info(
                f"Identified this node as ID {self.index}, using bind IP of '{self.bind_address}', "
                f"and network interface of {interface_name(self.bind_address)}"
            )
        else:
            self.log.info(f"Identified this node as ID {self.index}, using bind address of '{entry}'")
        self.map_hash = node_map_hash(self.entries)
        self.links = [PeerLink(index, entry, self._address_at_start(entry)) for index, entry in enumerate(self.entries)]

    def _address_at_start(self, entry: str) -> str | None:
        return entry if is_ip_literal(entry) else self._first_address(resolve(entry))

    def _first_address(self, addresses: list[str]) -> str | None:
        """The address a host name leads to: the first one of the bind address's family."""
        family_v6 = ":" in self.bind_address
        return next((address for address in addresses if (":" in address) == family_v6), None)

    def _bind_listeners(self) -> None:
        try:
            self.peer_socket = listening_tcp_socket(self.bind_address, self.port)
        except OSError as exc:
            raise StartupError(f"Failed to bind IMEX server to {self.bind_address}:{self.port}: {exc.strerror}") from exc
        if not self.config.enabled("IMEX_CMD_ENABLED"):
            return
        cmd_port = self.config.get("IMEX_CMD_PORT")
        cmd_path = self.config.get("IMEX_CMD_UNIX_DOMAIN_PATH")
        if not cmd_port and not cmd_path:
            self.log.warning("IMEX_CMD_ENABLED=1 but neither IMEX_CMD_PORT nor IMEX_CMD_UNIX_DOMAIN_PATH is set; command service not started.")
        if cmd_port:
            address = self.config.get("IMEX_CMD_BIND_INTERFACE_IP") or "0.0.0.0"
            port = self.config.get_int("IMEX_CMD_PORT")
            try:
                self.cmd_tcp_socket = listening_tcp_socket(address, port)
            except OSError as exc:
                raise StartupError(f"Failed to bind IMEX command service to {address}:{port}: {exc.strerror}") from exc
        if cmd_path:
            try:
                self.cmd_unix_socket = listening_unix_socket(cmd_path)
            except OSError as exc:
                raise StartupError(f"Failed to bind IMEX command service to {cmd_path}: {exc.strerror}") from exc

    # ----------------------------------------------------------------------- serving

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._on_loop_exception)
        self.stop_requested = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
            loop.add_signal_handler(signum, self._request_stop, signum)
        loop.add_signal_handler(signal.SIGUSR1, self._restart_outgoing)
        # SIGHUP dumps the real daemon's verbose ring buffer; it must not terminate the daemon.
        loop.add_signal_handler(signal.SIGHUP, self.log.info, "Received SIGHUP; the simulator keeps no verbose log buffer to dump.")

        servers = []
        if self.cmd_tcp_socket is not None:
            servers.append(await asyncio.start_server(self._serve_command, sock=self.cmd_tcp_socket))
        if self.cmd_unix_socket is not None:
            servers.append(await asyncio.start_unix_server(self._serve_command, sock=self.cmd_unix_socket))
        if self.server_tls is not None:
            self.state = "STARTING_AUTH_SERVER"
        servers.append(await asyncio.start_server(self._serve_peer, sock=self.peer_socket, ssl=self.server_tls, limit=wire.MAX_LINE_BYTES))
        self.log.info("Started processing of incoming messages.")
        self.log.info(f"Creating gRPC channels to all peers (nPeers = {len(self.links)}).")
        tasks = [asyncio.create_task(self._run_link(link)) for link in self.links]
        tasks.append(asyncio.create_task(self._watch_grace()))
        self.log.info("IMEX_WAIT_FOR_QUORUM != FULL, continuing initialization without waiting for connections to all nodes.")
        self.log.info("GPU event successfully subscribed")
        self.state = "READY"
        await self.stop_requested.wait()
        await self._shut_down(servers, tasks)

    def _on_loop_exception(self, _loop, context: dict) -> None:
        detail = context.get("exception") or ""
        self.log.error(f"{context.get('message', 'unexpected error')} {detail}".rstrip())

    def _request_stop(self, signum: int) -> None:
        if self.stop_requested.is_set():
            return
        self.log.info(f"Received signal {signal.Signals(signum).name}, shutting down.")
        record_event("stop", instance=self.instance, signal=signal.Signals(signum).name)
        self.state = "SHUTTING_DOWN"
        self.stop_requested.set()

    async def _shut_down(self, servers: list, tasks: list) -> None:
        self.stopping = True
        for task in tasks:
            task.cancel()  # closes the outgoing connections; peers' servers just see them end
        await asyncio.wait(tasks, timeout=SHUTDOWN_NOTICE_TIMEOUT_S)
        # signals.html: "The signaled nvidia-imex instance will notify other nodes of the
        # shutdown". Peers learn it on their own outgoing connections, i.e. our server side.
        notice = wire.encode({"type": "bye"})
        writers = list(self.server_writers)
        for writer in writers:
            writer.write(notice)
        try:
            async with asyncio.timeout(SHUTDOWN_NOTICE_TIMEOUT_S):
                await asyncio.gather(*(writer.drain() for writer in writers), return_exceptions=True)
        except TimeoutError:
            self.log.warning("Not every peer could be told about the shutdown in time.")
        for writer in writers:
            writer.close()
        for server in servers:
            server.close()
        if self.cmd_unix_socket is not None:
            try:
                os.unlink(self.config.get("IMEX_CMD_UNIX_DOMAIN_PATH"))
            except OSError:
                pass
        self.log.info("IMEX daemon shutdown complete.")

    def _use_current_server_credentials(self, ssl_object, _server_name, _context) -> None:
        if ssl_object.context is not self.active_server_tls:
            ssl_object.context = self.active_server_tls

    def _reload_credentials(self) -> None:
        """SIGUSR1 with mTLS from files: read the key, certificate and CA files again (signals.html:
        "reload SSL credentials"). The config.cfg keys are not read again: they take a restart. What
        the real daemon does with files it cannot load is not documented; the simulator keeps the
        credentials it had and says so."""
        try:
            server, client = build_contexts(self.config)
        except AuthConfigError as exc:
            self.log.error(f"Failed to reload SSL/TLS credentials, keeping those loaded before: {exc}")
            record_event("reload", instance=self.instance, tls=False, error=str(exc))
            return
        self.active_server_tls, self.client_tls = server, client
        self.tls_loaded_at = time.time()
        self.tls_reloads += 1
        self.log.info(f"Reloaded SSL/TLS credentials from {self.config.get('IMEX_SERVER_CERT')} "
                      f"(reload {self.tls_reloads} of instance {self.instance}).")
        record_event("reload", instance=self.instance, tls=True)

    def _hello(self) -> dict:
        return {"type": "hello", "index": self.index, "version": self.version, "map": self.map_hash, "instance": self.instance}

    def _status(self) -> dict:
        return {
            "type": "status",
            "state": self.state,
            "version": self.version,
            "hostname": self.hostname,
            "index": self.index,
            "pid": os.getpid(),
            "nodes": self.entries,
            # Test equipment: where each entry pointed when last resolved (not in the vendor's output).
            "resolved": {str(link.index): link.address for link in self.links},
            "connections": {str(link.index): link.state for link in self.links},
            "tls": {"enabled": self.client_tls is not None, "loaded_at": self.tls_loaded_at,
                    "reloads": self.tls_reloads},
        }

    async def _serve_command(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await read_message(reader, CMD_REQUEST_TIMEOUT_S)
            if request is not None and request["type"] == "status":
                writer.write(wire.encode(self._status()))
                await writer.drain()
        except (OSError, ValueError, TimeoutError):
            pass  # the ctl gave up or sent garbage; nothing to report back
        finally:
            writer.close()

    async def _serve_peer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Server side of a peer's outgoing connection: answer the hello and the pings."""
        self.server_writers.add(writer)
        try:
            hello = await read_message(reader, LOSS_TIMEOUT_S)
            if hello is None or hello["type"] != "hello" or self.stopping:
                return
            writer.write(wire.encode(self._hello()))
            await writer.drain()
            while True:
                message = await read_message(reader, PEER_IDLE_TIMEOUT_S)
                if message is None or message["type"] == "bye":
                    return  # closed, garbage, or the peer shuts down
                if message["type"] == "ping":
                    writer.write(wire.encode({"type": "pong"}))
                    await writer.drain()
        except (OSError, ValueError, TimeoutError):
            return
        finally:
            self.server_writers.discard(writer)
            writer.close()

    # --------------------------------------------------------- outgoing links (one per node)

    async def _run_link(self, link: PeerLink) -> None:
        while not self.stopping:
            link.wake.clear()
            outcome = await self._connect_once(link)
            # Only the connection that was open when SIGUSR1 arrived counts as self-inflicted.
            link.restart_requested = False
            self._link_down(link, outcome)
            if outcome == RESTART or link.wake.is_set():
                continue  # SIGUSR1 (also one that came during a failing attempt): again at once
            try:
                async with asyncio.timeout(self._next_wait(link)):
                    await link.wake.wait()
            except TimeoutError:
                pass

    def _next_wait(self, link: PeerLink) -> float:
        """The wait before the next attempt: the next step of the backoff schedule (its last step
        repeats: whether the real one grows past 125 s is not published), re-read from the knobs
        so that a running test bed can switch to the real schedule."""
        try:
            self.backoff_s = backoff_schedule(testbed.faults(), self.reconnect_interval_s)
            self.schedule_problem = ""
        except (testbed.KnobError, ValueError) as exc:
            if str(exc) != self.schedule_problem:  # once per problem, not once per wait
                self.log.warning(f"Keeping the reconnect schedule: {exc}")
                self.schedule_problem = str(exc)
        wait = self.backoff_s[min(link.waits, len(self.backoff_s) - 1)]
        link.waits += 1
        if wait != link.last_wait:  # one line per change, not one per retry
            self.log.info(f"Next connection attempt to {link.describe()} in {wait:g} s.")
            link.last_wait = wait
        return wait

    async def _resolve(self, link: PeerLink) -> None:
        """Look the entry up again (getaddrinfo: /etc/hosts, then whatever nsswitch.conf names)."""
        if is_ip_literal(link.entry):
            return
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(link.entry, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            infos = []
        address = self._first_address([info[4][0] for info in infos])
        if address != link.address:
            # The simulator's own wording: the vendor's log for this is not published.
            self.log.info(f"Node config entry '{link.entry}' (node {link.index}) now resolves to "
                          f"{address or 'nothing'}, was {link.address or 'nothing'}.")
        link.address = address

    async def _connect_once(self, link: PeerLink) -> str:
        # An entry is resolved at start and again after SIGUSR1 (the DRA driver's DNS-name mode
        # relies on SIGUSR1 for "DNS name re-resolution"): a changed /etc/hosts alone moves no link.
        # One that did not resolve is looked up again at each attempt (UNKNOWN what the real daemon
        # does; tolerant: the peer stays unconnected and the daemon keeps retrying).
        if link.resolve_requested or link.address is None:
            link.resolve_requested = False
            await self._resolve(link)
        if link.address is None:
            self._note_failure(link, unresolved(link.entry))
            return FAILED
        target = self.config.get("IMEX_SECURITY_TARGET_OVERRIDE") or link.entry
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                reader, writer = await asyncio.open_connection(
                    link.address,
                    self.port,
                    ssl=self.client_tls,
                    server_hostname=target if self.client_tls is not None else None,
                    local_addr=(self.bind_address, 0),
                    limit=wire.MAX_LINE_BYTES,
                )
        except (OSError, TimeoutError) as exc:
            self._note_failure(link, exc)
            return FAILED
        link.writer = writer
        try:
            writer.write(wire.encode(self._hello()))
            hello = await read_message(reader, CONNECT_TIMEOUT_S)
            if hello is None or hello["type"] != "hello":
                # With TLS 1.3 a server that rejects our certificate shows up only here.
                raise ValueError("connection closed before the peer's hello")
        except (OSError, ValueError, TimeoutError) as exc:
            self._note_failure(link, exc)
            link.writer = None
            writer.close()
            return FAILED
        self._link_up(link, hello)
        try:
            outcome = await self._exchange_heartbeats(reader, writer)
        except (OSError, ValueError, TimeoutError):
            outcome = LOST
        finally:
            link.writer = None
            writer.close()
        return RESTART if outcome == LOST and link.restart_requested else outcome

    async def _exchange_heartbeats(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """Read until the peer goes away; a separate task sends the pings."""
        pinger = asyncio.create_task(self._send_pings(writer))
        try:
            while True:
                message = await read_message(reader, LOSS_TIMEOUT_S)
                if message is None:
                    return LOST
                if message["type"] == "bye":
                    return SHUTDOWN
        finally:
            pinger.cancel()

    @staticmethod
    async def _send_pings(writer: asyncio.StreamWriter) -> None:
        ping = wire.encode({"type": "ping"})
        try:
            while True:
                writer.write(ping)
                await writer.drain()
                await asyncio.sleep(HEARTBEAT_INTERVAL_S)
        except OSError:
            return  # the reading side notices the loss and ends the connection

    def _note_failure(self, link: PeerLink, error) -> None:
        """A connection attempt failed; a link that was up is now lost."""
        if link.state in (wire.CONNECTED, wire.VERSION_MISMATCH, wire.NODE_MAP_MISMATCH):
            self._mark_lost(link)
        message = str(error) or type(error).__name__
        if message != link.last_failure:  # one line per new reason, not one per retry
            self.log.warning(f"Failed to connect to {link.describe()}: {message}")
            link.last_failure = message

    def _link_up(self, link: PeerLink, hello: dict) -> None:
        link.last_failure = ""
        link.lost_at = None
        link.waits, link.last_wait = 0, None
        if link.peer_instance is not None and hello.get("instance") != link.peer_instance:
            self.log.info(f"Detected a new IMEX instance on {link.describe()}; cleaning up its imports and exports.")
        link.peer_instance = hello.get("instance")
        if hello.get("version") != self.version:
            link.state = wire.VERSION_MISMATCH
            self.log.warning(
                f"Version mismatch with {link.describe()}: local {self.version}, remote {hello.get('version')}; communication disabled."
            )
        elif hello.get("map") != self.map_hash or hello.get("index") != link.index:
            # Equal maps but another index happens only with duplicate entries: still no agreement.
            link.state = wire.NODE_MAP_MISMATCH
            self.log.warning(f"Node map mismatch with {link.describe()}; communication disabled.")
        else:
            link.state = wire.CONNECTED
            self.log.info(f"Connection established to {link.describe()}")

    def _link_down(self, link: PeerLink, outcome: str) -> None:
        if outcome == SHUTDOWN:
            # INFERRED: a peer that announced its shutdown is cleaned up at once, i.e. shown as D.
            link.state = wire.DISCONNECTED
            link.lost_at = None
            self.log.info(f"{link.describe().capitalize()} announced its shutdown; cleaning up its imports and exports.")
        elif outcome == LOST:
            self._mark_lost(link)

    def _mark_lost(self, link: PeerLink) -> None:
        link.lost_at = time.monotonic()
        if self.grace_s == 0:
            link.state = wire.DISCONNECTED
            self.log.warning(f"Connection lost to {link.describe()}; IMEX_NODE_DISCONNECTED_GRACE_TIME=0, cleaning up.")
        else:
            link.state = wire.RECOVERING
            self.log.warning(f"Connection lost to {link.describe()}; waiting for it to recover.")

    async def _watch_grace(self) -> None:
        """R becomes D once IMEX_NODE_DISCONNECTED_GRACE_TIME has passed (never with -1)."""
        if self.grace_s <= 0:
            return
        while True:
            await asyncio.sleep(GRACE_CHECK_INTERVAL_S)
            now = time.monotonic()
            for link in self.links:
                if link.state == wire.RECOVERING and now - link.lost_at >= self.grace_s:
                    link.state = wire.DISCONNECTED
                    self.log.info(f"Grace time of {self.grace_s} s expired for {link.describe()}; cleaning up its imports and exports.")

    def _restart_outgoing(self) -> None:
        now = time.monotonic()
        if now - self.last_sigusr1 < SIGUSR1_MIN_INTERVAL_S:
            self.log.info("Ignoring SIGUSR1: processed at most once every 5 seconds.")
            return
        self.last_sigusr1 = now
        if self.client_tls is not None and self.config.get("IMEX_AUTH_SOURCE") in ("FILE", "ENV_PATH"):
            self._reload_credentials()
        self.log.info("Received SIGUSR1, re-establishing all outgoing connections.")
        for link in self.links:
            # Host names are resolved again, and a peer that was down is tried at once: the
            # backoff starts over (what makes SIGUSR1 the way to reach a tray back from repair).
            link.resolve_requested = True
            link.waits, link.last_wait = 0, None
            if link.writer is not None:
                link.restart_requested = True
                link.writer.close()
            link.wake.set()


def unresolved(entry: str) -> str:
    return f"host name '{entry}' does not resolve"


def backoff_schedule(faults: dict, interval: float) -> tuple[float, ...]:
    """The waits between attempts to one peer: faults.json reconnect_backoff_s, else the interval."""
    schedule = faults.get("reconnect_backoff_s")
    if schedule is None:
        return (interval,)
    if not isinstance(schedule, list) or not schedule or any(
            isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait <= 0 for wait in schedule):
        raise ValueError(f"faults.json reconnect_backoff_s must be a list of positive numbers, not {schedule!r}")
    return tuple(float(wait) for wait in schedule)


def events_path() -> str | None:
    if os.environ.get(EVENTS_ENV):
        return os.environ[EVENTS_ENV]
    return EVENTS_PATH if testbed.testbed_dir() == testbed.DEFAULT_TESTBED_DIR else None


def record_event(event: str, **fields) -> None:
    """Append one line to the lifetime record; a record that cannot be written never stops the daemon."""
    path = events_path()
    if path is None:
        return
    line = json.dumps(dict({"event": event, "pid": os.getpid(), "time": round(time.time(), 3)}, **fields), sort_keys=True)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def daemonize() -> None:
    """Classic double fork, so that systemd's Type=forking sees the start command return.

    The first parent waits for the middle child: when the start command returns, only the daemon
    itself is left in the unit's cgroup, so systemd cannot take the short-lived middle child for
    the main process (and then stop the unit when it exits).
    """
    middle = os.fork()
    if middle > 0:
        os.waitpid(middle, 0)
        os._exit(0)  # pylint: disable=protected-access
    os.setsid()
    if os.fork() > 0:
        os._exit(0)  # pylint: disable=protected-access
    os.chdir("/")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # stderr stays: with no usable log file the log goes there (the journal)
    os.close(null)


def main(argv: list[str] | None = None) -> int:
    try:
        options = Options(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        sys.stderr.write(f"{exc}\n{USAGE}")
        return 1
    if options.show_version:
        print(testbed.imex_version_line())
        return 0
    try:
        config = ImexConfig.load(options.config_path)
    except OSError:
        sys.stderr.write(f"Unable to open configuration file at {options.config_path}\n")
        return 1
    try:
        log = VendorLog(
            config.get("LOG_FILE_NAME"),
            append=config.enabled("LOG_APPEND_TO_LOG"),
            level=config.get_int("LOG_LEVEL"),
            use_syslog=config.enabled("LOG_USE_SYSLOG"),
        )
        daemon = Daemon(config, options, log)
    except ConfigError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    try:
        daemon.prepare()
    except (StartupError, ConfigError) as exc:
        return log.fatal(str(exc))
    if config.enabled("DAEMONIZE"):
        daemonize()
    record_event("start", instance=daemon.instance)
    asyncio.run(daemon.serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
