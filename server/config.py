"""Apache-style configuration: ``key=value`` files with Apache RocketMQ's key names and defaults.

A user's ``namesrv.conf`` / ``broker.conf`` should carry over unchanged, so keys are Apache's and a
file is read the way ``java.util.Properties`` reads it (``#``/``!`` comments, ``=``/``:``/space
separators, backslash continuations). Like Apache, one file feeds several config objects (the component
config and the network config); a key none of them knows is reported, not fatal.

Each dataclass field carries its help text and the check of a configured value (:mod:`.config_keys`),
so ``ferrymq <cmd> --help``, ``--print-config`` and the refusal of a bad value come from the same place
as the defaults.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from ferrymq.remoting.options import TransportOptions
from ferrymq.remoting.tls import ClientAuth, ClientTls, KeyPair, PeerCheck, ServerTls, TlsMode
from ferrymq.server.config_keys import (
    ALIASES,
    ConfigError,
    code_list,
    current_names,
    describe,
    equal_to,
    from_properties,
    host_ports,
    ip_or_empty,
    json_object,
    key,
    known_keys,
    limit,
    nearest_key,
    one_of,
    port,
    positive,
    to_properties,
    unknown_keys,
)
from ferrymq.server.store.config import (
    BROKER_ROLES,
    FLUSH_DISK_TYPES,
    check_consume_queue_size,
    check_delay_levels,
    check_hours,
)
from ferrymq.wire.frame import DEFAULT_MAX_FRAME_SIZE
from ferrymq.wire.properties import PropertiesError, parse_properties
from ferrymq.wire.signature import Credentials

__all__ = [
    "ALIASES",
    "BrokerConfig",
    "ConfigError",
    "GatewayConfig",
    "NamesrvConfig",
    "NettyServerConfig",
    "PlannedFeatures",
    "StandaloneConfig",
    "TlsConfig",
    "current_names",
    "describe",
    "from_properties",
    "known_keys",
    "load_properties",
    "namesrv_config",
    "tls_config",
    "nearest_key",
    "to_properties",
    "unknown_keys",
]

_HOME = os.path.expanduser("~")

#: What a setting of a replication mode FerryMQ does not have yet is told (classic master/slave exists).
NO_REPLICATION = "this replication mode is not implemented yet in FerryMQ (classic master/slave is)"


# ---------------------------------------------------------------- reading files


def load_properties(path: str | os.PathLike) -> dict[str, str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = Path(path).read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); "
                          "save the file as UTF-8") from None
    try:
        return parse_properties(text, str(path))
    except PropertiesError as exc:
        raise ConfigError(str(exc)) from None


# ---------------------------------------------------------------- the config objects


@dataclass
class NettyServerConfig:
    """Listening socket and connection limits (Apache's NettyServerConfig, same keys)."""

    bindAddress: str = key("0.0.0.0", "Address to listen on.")
    listenPort: int = key(0, "TCP port to listen on (name server 9876, broker 10911 unless set).", check=port)
    serverChannelMaxIdleTimeSeconds: int = key(
        120, "Close a connection with no traffic in either direction for this many seconds (0 = never)."
    )
    writeBufferHighWaterMark: int = key(
        0, "Stop reading a connection while this many response bytes wait unsent (0 = 64 KiB, Netty's default)."
    )
    serverSocketBacklog: int = key(1024, "Listen backlog.")
    shutdownWaitTimeSeconds: int = key(
        30, "On SIGTERM/SIGINT, how long to wait for requests in flight before closing connections."
    )
    frameMaxLength: int = key(
        DEFAULT_MAX_FRAME_SIZE,
        "Largest accepted frame in bytes; a larger one closes the connection "
        "(FerryMQ key; Apache: system property com.rocketmq.remoting.frameMaxLength).",
    )
    maxConnections: int = key(
        0, "Close connections accepted while this many are open, the broker's two ports counted together "
        "(FerryMQ key; 0 = no limit, as Apache).",
        check=limit,
    )
    maxInFlightRequestsPerConnection: int = key(
        10000, "Answer SYSTEM_BUSY to a request arriving while this many requests of its connection are "
        "unanswered, a held long-poll pull included (FerryMQ key; Apache bounds its thread pools' queues "
        "instead, sendThreadPoolQueueCapacity=10000; 0 = no limit).",
        check=limit,
    )

    def transport_options(self) -> TransportOptions:
        return TransportOptions(
            max_frame_size=self.frameMaxLength,
            idle_timeout=float(self.serverChannelMaxIdleTimeSeconds),
            write_high_water=self.writeBufferHighWaterMark or 64 * 1024,
            shutdown_grace=float(self.shutdownWaitTimeSeconds),
            max_connections=self.maxConnections,
            max_inflight_per_connection=self.maxInFlightRequestsPerConnection,
        )


NAMESRV_PORT = 9876
BROKER_PORT = 10911


def _true_false_or_unset(value: str) -> str | None:
    return None if value in ("", "true", "false") else "not valid, expected true, false or nothing"


#: Apache's default ``tls.config.file``
TLS_CONFIG_FILE = "/etc/rocketmq/tls.properties"
#: keys ``tls.config.file`` cannot set (Apache reads them from system properties only)
_NOT_IN_TLS_FILE = ("tls.server.mode", "tls.enable", "tls.config.file")


@dataclass
class TlsConfig:
    """TLS on the remoting listener and the server's own connections (Apache's TlsSystemConfig).

    Apache reads these as JVM system properties (``-Dtls.server.mode=enforcing``) and then from the
    properties file ``tls.config.file``; FerryMQ reads them from the config file under the same names, then
    from ``tls.config.file``, whose values win as Apache's do.
    """

    server_mode: str = key(
        "permissive", "disabled: plain clients only; permissive: TLS and plain clients on the same port; "
        "enforcing: TLS clients only, a plain connection is closed.",
        check=one_of(*(m.value for m in TlsMode)), name="tls.server.mode")
    enable: str = key(
        "", "The server's own connections (a broker's to the name servers) use TLS: true, false, or nothing "
        "for 'when tls.server.mode is enforcing' (Apache's default).", check=_true_false_or_unset, name="tls.enable")
    config_file: str = key(
        TLS_CONFIG_FILE, "A properties file of the other tls.* keys, read when it exists; its values win.",
        name="tls.config.file")
    test_mode: bool = key(
        True, "Serve a self-signed certificate made at start and check no peer certificate (Apache's default); "
        "false to use the certificate and key below.", name="tls.test.mode.enable")
    server_need_client_auth: str = key(
        "none", "Ask TLS clients for a certificate: none, optional or require.",
        check=one_of(*(a.value for a in ClientAuth)), name="tls.server.need.client.auth")
    server_key_path: str = key("", "The server's private key, PEM in PKCS#8.", name="tls.server.keyPath")
    server_key_password: str = key("", "Password of an encrypted tls.server.keyPath.", secret=True,
                                   name="tls.server.keyPassword")
    server_cert_path: str = key("", "The server's certificate chain, PEM.", name="tls.server.certPath")
    server_auth_client: bool = key(
        False, "Check client certificates against tls.server.trustCertPath (false: any certificate is accepted).",
        name="tls.server.authClient")
    server_trust_cert_path: str = key("", "CA certificates (PEM) that client certificates must chain to.",
                                      name="tls.server.trustCertPath")
    client_key_path: str = key("", "Private key (PEM, PKCS#8) of the server's own TLS connections.",
                               name="tls.client.keyPath")
    client_key_password: str = key("", "Password of an encrypted tls.client.keyPath.", secret=True,
                                   name="tls.client.keyPassword")
    client_cert_path: str = key("", "Certificate chain (PEM) the server's own TLS connections present.",
                                name="tls.client.certPath")
    client_auth_server: bool = key(
        False, "The server's own TLS connections check the peer's certificate against tls.client.trustCertPath.",
        name="tls.client.authServer")
    client_trust_cert_path: str = key("", "CA certificates (PEM) a peer's certificate must chain to.",
                                      name="tls.client.trustCertPath")

    @property
    def mode(self) -> TlsMode:
        return TlsMode(self.server_mode)

    @property
    def use_tls(self) -> bool:
        """Whether this server's own connections use TLS (Apache's NettyClientConfig.useTLS)."""
        return self.enable == "true" or (self.enable == "" and self.mode is TlsMode.ENFORCING)

    def server_tls(self) -> ServerTls | None:
        """The listener's TLS, its files read now so that a bad one stops the start; None when disabled."""
        if self.mode is TlsMode.DISABLED:
            return None
        own = None
        if not self.test_mode:
            if not (self.server_cert_path and self.server_key_path):
                raise ConfigError(f"tls.server.mode={self.server_mode} with tls.test.mode.enable=false needs "
                                  "tls.server.certPath and tls.server.keyPath")
            own = KeyPair(self.server_cert_path, self.server_key_path, self.server_key_password)
        tls = ServerTls(self.mode, own, ClientAuth(self.server_need_client_auth),
                        PeerCheck(self.server_auth_client, self.server_trust_cert_path), self.test_mode)
        _load("tls.server", tls.check_files)
        return tls

    def _listener_pair(self, why: str) -> KeyPair:
        if not (self.server_cert_path and self.server_key_path):
            raise ConfigError(f"{why} needs tls.server.certPath and tls.server.keyPath (the HTTP and MQTT clients "
                              "check the server's certificate; test mode's self-signed one would not pass)")
        return KeyPair(self.server_cert_path, self.server_key_path, self.server_key_password)

    def mqtt_tls(self) -> ServerTls:
        """The MQTT gateway's TLS listener: TLS only, with the listener certificate and client checks."""
        tls = ServerTls(TlsMode.ENFORCING, self._listener_pair("mqttTlsListenPort"),
                        ClientAuth(self.server_need_client_auth),
                        PeerCheck(self.server_auth_client, self.server_trust_cert_path), test_mode=False)
        _load("tls.server", tls.check_files)
        return tls

    def http_ssl(self) -> dict[str, object]:
        """uvicorn's ``ssl_*`` settings of the HTTP gateway (stdlib ``ssl``: a client certificate asked for is
        checked against tls.server.trustCertPath, or the system's CAs)."""
        import ssl

        pair = self._listener_pair("httpTlsEnable=true")
        settings: dict[str, object] = {"ssl_certfile": pair.cert_path, "ssl_keyfile": pair.key_path,
                                       "ssl_keyfile_password": pair.key_password or None}
        auth = ClientAuth(self.server_need_client_auth)
        if auth is not ClientAuth.NONE:
            settings["ssl_cert_reqs"] = ssl.CERT_REQUIRED if auth is ClientAuth.REQUIRE else ssl.CERT_OPTIONAL
            settings["ssl_ca_certs"] = self.server_trust_cert_path or None
        return settings

    def client_tls(self) -> ClientTls | None:
        """The TLS of this server's own connections; None when they are plain."""
        if not self.use_tls:
            return None
        if self.test_mode:
            return ClientTls()
        own = None
        if self.client_cert_path and self.client_key_path:
            own = KeyPair(self.client_cert_path, self.client_key_path, self.client_key_password)
        tls = ClientTls(own, PeerCheck(self.client_auth_server, self.client_trust_cert_path))
        _load("tls.client", tls.check_files)
        return tls


def _load(prefix: str, build) -> None:
    """Turn an unreadable certificate, key or password into a ConfigError naming the keys."""
    try:
        build()
    except Exception as exc:  # noqa: BLE001 - OSError, ValueError, OpenSSL.SSL.Error: all mean the same here
        raise ConfigError(f"{prefix}.certPath/keyPath/keyPassword/trustCertPath: cannot be used: {exc}") from None


def tls_config(props: dict[str, str]) -> TlsConfig:
    """The tls.* keys of ``props``, then those of ``tls.config.file`` when it exists."""
    first = from_properties(TlsConfig, props)
    path = Path(first.config_file)
    if not (path.is_file() and os.access(path, os.R_OK)):
        return first
    in_file = {k: v for k, v in load_properties(path).items() if k not in _NOT_IN_TLS_FILE}
    try:
        return from_properties(TlsConfig, {**props, **in_file})
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


@dataclass
class NamesrvConfig:
    """Name server settings (Apache's NamesrvConfig keys)."""

    rocketmqHome: str = key(
        os.environ.get("ROCKETMQ_HOME", ""), "Installation directory (informational; from $ROCKETMQ_HOME)."
    )
    kvConfigPath: str = key(
        os.path.join(_HOME, "namesrv", "kvConfig.json"), "File where KV config (PUT_KV_CONFIG) is persisted."
    )
    configStorePath: str = key(
        os.path.join(_HOME, "namesrv", "namesrv.properties"),
        "Where UPDATE_NAMESRV_CONFIG writes the whole config; as in Apache it is the -c file when one is given, "
        "so that file is rewritten (comments lost) by a config update.",
    )
    productEnvName: str = key("center", "Environment name (informational).")
    clusterTest: bool = key(
        False, "Apache's cluster-test mode (not supported; must stay false).",
        check=equal_to(False, "Apache's cluster-test mode is not implemented in FerryMQ; leave it false"),
    )
    orderMessageEnable: bool = key(
        False, "Copy the ORDER_TOPIC_CONFIG KV value of a topic into its route's orderTopicConf."
    )
    returnOrderTopicConfigToBroker: bool = key(
        True, "Answer REGISTER_BROKER with the ORDER_TOPIC_CONFIG namespace as a KVTable body."
    )
    scanNotActiveBrokerInterval: int = key(
        5000, "How often (ms) to look for brokers whose registration expired (Apache default 5000)."
    )
    brokerChannelExpiredTime: int = key(
        120000,
        "Drop a broker not re-registered for this many ms, unless its REGISTER_BROKER carries "
        "heartbeatTimeoutMillis (FerryMQ key; Apache's fixed default is 120000).",
    )
    supportActingMaster: bool = key(False, "Slave acting-master routes when the master is gone.")
    enableAllTopicList: bool = key(True, "Answer GET_ALL_TOPIC_LIST_FROM_NAMESERVER (else SYSTEM_ERROR 'disable').")
    enableTopicList: bool = key(True, "Answer GET_TOPICS_BY_CLUSTER and the unit topic lists.")
    notifyMinBrokerIdChanged: bool = key(
        False, "Notify brokers when the lowest broker id changes (not supported; must stay false).",
        check=equal_to(False, "broker id change notification is not implemented yet in FerryMQ; leave it false"),
    )
    deleteTopicWithBrokerRegistration: bool = key(
        False, "On registration, drop a broker's topics missing from its topic table."
    )
    needWaitForService: bool = key(False, "Refuse route queries for waitSecondsForService after start.")
    waitSecondsForService: int = key(45, "See needWaitForService.")
    configBlackList: str = key(
        "configBlackList;configStorePath;kvConfigPath", "Keys UPDATE_NAMESRV_CONFIG may not change (';'-separated)."
    )


@dataclass
class BrokerConfig:
    """Broker settings the command line documents (Apache's BrokerConfig and MessageStoreConfig keys)."""

    brokerClusterName: str = key("DefaultCluster", "Cluster this broker registers under.")
    brokerName: str = key(socket.gethostname(), "Broker group name (Apache default: the host name).")
    brokerId: int = key(
        0, "0 = master; a slave's id is > 0 (as in Apache, a master's id is always 0).",
        check=lambda v: None if v >= 0 else "not valid, expected 0 (master) or a slave id > 0",
    )
    brokerIP1: str = key(
        "", "IP address advertised to clients (default: this host's address).", check=ip_or_empty
    )
    namesrvAddr: str = key(
        os.environ.get("NAMESRV_ADDR", ""), "Name servers, 'host:port;host:port' (default $NAMESRV_ADDR).",
        check=host_ports,
    )
    listenPort: int = key(BROKER_PORT, "Client port; the fast/VIP channel is listenPort-2.", check=port)
    storePathRootDir: str = key(os.path.join(_HOME, "store"), "Root of the message store.")
    storePathCommitLog: str = key("", "Commit log directory (default <storePathRootDir>/commitlog).")
    mappedFileSizeCommitLog: int = key(
        1024 * 1024 * 1024, "Commit log segment size in bytes (Apache 4.x: mapedFileSizeCommitLog).", check=positive
    )
    mappedFileSizeConsumeQueue: int = key(
        300000 * 20, "Consume queue file size in bytes, 20-byte units (Apache 4.x: mapedFileSizeConsumeQueue).",
        check=check_consume_queue_size,
    )
    flushDiskType: str = key(
        "ASYNC_FLUSH", "SYNC_FLUSH: a send is answered once on disk; ASYNC_FLUSH: flushed every "
        "flushIntervalCommitLog ms.", check=one_of(*FLUSH_DISK_TYPES),
    )
    brokerRole: str = key(
        "ASYNC_MASTER", "ASYNC_MASTER, SYNC_MASTER (a send waits for inSyncReplicas copies) or SLAVE (docs/ha.md).",
        check=one_of(*BROKER_ROLES),
    )
    haListenPort: int = key(0, "Port slaves replicate from (0 = listenPort + 1, as Apache).", check=port)
    brokerIP2: str = key(
        "", "Address advertised for replication (haServerAddr = brokerIP2:haListenPort; default brokerIP1).",
        check=ip_or_empty,
    )
    haMasterAddress: str = key(
        "", "A slave's master HA address 'host:port' (empty: the one the name server's registration answer "
            "names).", check=host_ports,
    )
    haSendHeartbeatInterval: int = key(5000, "Ms between a slave's offset reports / a master's idle heartbeats.",
                                       check=positive)
    haHousekeepingInterval: int = key(20000, "Ms without reads after which either side closes a replication "
                                             "connection.", check=positive)
    haTransferBatchSize: int = key(32768, "Largest commit-log chunk the master sends in one frame, bytes.",
                                   check=positive)
    slaveReadEnable: bool = key(False, "A slave answers pulls, and a master suggests its slave to consumers far "
                                       "behind (else a slave refuses pulls).")
    inSyncReplicas: int = key(1, "SYNC_MASTER: copies a send waits for, the master's own included (1 = no wait).",
                              check=positive)
    slaveTimeout: int = key(3000, "SYNC_MASTER: ms a send waits for its slave copies before FLUSH_SLAVE_TIMEOUT.",
                            check=positive)
    enableControllerMode: bool = key(
        False, "Take the role and brokerId Apache's controller assigns (controller mode, docs/ha.md); brokerRole "
               "and brokerId are then ignored.")
    controllerAddr: str = key("", "Controller addresses, 'host:port;host:port' (controller mode).", check=host_ports)
    fetchControllerAddrByDnsLookup: bool = key(
        False, "Controller mode: controllerAddr is one 'name:port' whose A records are the controllers, resolved at "
               "start and every 2 minutes.")
    syncBrokerMetadataPeriod: int = key(5000, "Controller mode: ms between two GET_REPLICA_INFO polls of the "
                                              "controller (the push NOTIFY_BROKER_ROLE_CHANGED is quicker).",
                                        check=positive)
    syncControllerMetadataPeriod: int = key(10000, "Controller mode: ms between two asks for the controller leader.",
                                            check=positive)
    checkSyncStateSetPeriod: int = key(5000, "Controller mode, master: ms between two checks of the sync state set.",
                                       check=positive)
    brokerHeartbeatInterval: int = key(1000, "Controller mode: ms between two heartbeats to the controllers.",
                                       check=positive)
    sendHeartbeatTimeoutMillis: int = key(1000, "Controller mode: ms a heartbeat to a controller may take.",
                                          check=positive)
    controllerHeartBeatTimeoutMills: int = key(
        10000, "Controller mode: ms without a heartbeat after which the controller counts this broker dead.",
        check=positive)
    brokerElectionPriority: int = key(2**31 - 1, "Controller mode: the lower, the likelier this broker is elected "
                                                 "master.")
    storePathEpochFile: str = key("", "Controller mode: the epoch file (default <storePathRootDir>/epochFileCheckpoint).")
    storePathBrokerIdentity: str = key(
        "", "Controller mode: the file holding the brokerId the controller assigned (default "
            "<storePathRootDir>/brokerIdentity).")
    minInSyncReplicas: int = key(
        1, "Controller mode, SYNC_MASTER: a sync state set smaller than this refuses sends (SYSTEM_ERROR 'in-sync "
           "replicas not enough'); the message is not stored.", check=positive)
    allAckInSyncStateSet: bool = key(False, "Controller mode, SYNC_MASTER: a send waits for every broker of the sync "
                                            "state set.")
    haMaxGapNotInSync: int = key(256 * 1024 * 1024, "Bytes a slave may lag behind the master's commit log and "
                                                    "still count as in sync (haStatus).", check=positive)
    fileReservedTime: int = key(72, "Hours to keep commit log files.")
    deleteWhen: str = key(
        "04", "Hour(s) of day expired files are deleted, e.g. '04' or '01;04'.", check=check_hours
    )
    diskMaxUsedSpaceRatio: int = key(75, "Delete old files early when the disk is fuller than this percentage.")
    maxMessageSize: int = key(4 * 1024 * 1024, "Largest message body accepted, bytes.", check=positive)
    autoCreateTopicEnable: bool = key(True, "Create topics on first send (through TBW102).")
    autoCreateSubscriptionGroup: bool = key(True, "Create subscription groups on first use.")
    defaultTopicQueueNums: int = key(8, "Queues of an auto-created topic.")
    brokerPermission: int = key(
        6, "Broker permission bits (2 write, 4 read).",
        check=lambda v: None if 0 <= v <= 15 else "not valid, expected permission bits 0-15 (2 write, 4 read, 6 both)",
    )
    registerNameServerPeriod: int = key(30000, "How often (ms) to re-register with the name servers.")
    messageDelayLevel: str = key(
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        "Delay levels for scheduled messages: <number><s|m|h|d>, space-separated.", check=check_delay_levels,
    )
    longPollingEnable: bool = key(True, "Hold pulls with no new messages until data arrives or they time out.")
    transactionTimeOut: int = key(6000, "Ms before a half message is first checked back.")
    transactionCheckMax: int = key(15, "Check-backs before a half message is discarded.")
    transactionCheckInterval: int = key(30000, "Ms between transaction check rounds.")
    enablePropertyFilter: bool = key(False, "Allow SQL92 filtering on message properties.")
    filterSupportRetry: bool = key(False, "Apply SQL92 subscriptions to the group's retry topic too.")
    useServerSideResetOffset: bool = key(
        True, "resetOffsetByTime is kept by the broker and handed to the consumer's next pull (false: pushed "
        "to the online consumers with RESET_CONSUMER_CLIENT_OFFSET)."
    )
    timerWheelEnable: bool = key(True, "Accept timer messages (TIMER_DELIVER_MS / TIMER_DELAY_MS / TIMER_DELAY_SEC).")
    timerPrecisionMs: int = key(1000, "Timer slot width, ms: due times are rounded down to it.")
    timerMaxDelaySec: int = key(3 * 24 * 3600, "Longest timer delay accepted, seconds.")
    regionId: str = key("DefaultRegion", "Region id reported in send responses (MSG_REGION).")
    traceOn: bool = key(True, "Reported in send responses (TRACE_ON).")
    rejectTransactionMessage: bool = key(False, "Refuse transactional (half) messages with NO_PERMISSION.")
    shortPollingTimeMills: int = key(1000, "Hold time (ms) of a suspended pull when longPollingEnable is false.")
    reviveInterval: int = key(1000, "How often (ms) POP messages past their invisible time are revived.")
    enableRetryTopicV2: bool = key(
        False, "Name POP retry topics %RETRY%group+topic instead of %RETRY%group_topic."
    )
    popFromRetryProbability: int = key(20, "Percent of POP requests that read the retry topic first.")
    initPopOffsetByCheckMsgInMem: bool = key(
        True, "A POP group new to a queue whose first message is still in memory starts at it (else at the last).")
    serverLoadBalancerEnable: bool = key(True, "QUERY_ASSIGNMENT balances queues over the group's clients.")
    defaultMessageRequestMode: str = key(
        "PULL", "Mode QUERY_ASSIGNMENT answers for a group and topic setConsumeMode has not set (PULL or POP).",
        check=one_of("PULL", "POP"),
    )
    defaultPopShareQueueNum: int = key(-1, "popShareQueueNum of a POP group setConsumeMode has not set (-1: all queues).")
    flushConsumerOffsetInterval: int = key(5000, "How often (ms) consumer offsets are written to consumerOffset.json.")
    registerBrokerTimeoutMills: int = key(24000, "Timeout (ms) of one REGISTER_BROKER call.")
    compressedRegister: bool = key(False, "Send REGISTER_BROKER bodies zlib-compressed.")
    clusterTopicEnable: bool = key(True, "Create a topic named after the cluster (perm RW).")
    brokerTopicEnable: bool = key(True, "Create a topic named after the broker (perm RW).")
    traceTopicEnable: bool = key(False, "Create the message trace topic (msgTraceTopicName).")
    msgTraceTopicName: str = key("RMQ_SYS_TRACE_TOPIC", "Name of the message trace topic.")

    def __post_init__(self) -> None:
        if self.enableControllerMode:
            if not self.controllerAddr:
                raise ConfigError("enableControllerMode=true needs controllerAddr")
            if self.fetchControllerAddrByDnsLookup and ";" in self.controllerAddr.strip().strip(";"):
                # Apache's broker resolves the text before the first ':' and reaches no controller
                raise ConfigError(f"fetchControllerAddrByDnsLookup=true: controllerAddr must be one domain name "
                                  f"and port, 'name:port', whose A records are the controllers; got "
                                  f"{self.controllerAddr!r}")
            return  # the controller assigns brokerId and the role
        # Apache's BrokerStartup: a master's id is forced to 0, a slave's must be > 0.
        if self.brokerRole == "SLAVE":
            if self.brokerId <= 0:
                raise ConfigError(f"brokerRole=SLAVE: a slave's brokerId must be > 0 (brokerId={self.brokerId})")
        else:
            self.brokerId = 0

    def ha_port(self, listen_port: int | None = None) -> int:
        """The HA listener's port: haListenPort, or the client port (``listen_port`` as bound, else
        listenPort) + 1 when it is 0."""
        return self.haListenPort or (self.listenPort if listen_port is None else listen_port) + 1

    @property
    def is_slave(self) -> bool:
        return self.brokerRole == "SLAVE"


_ACL_V1_REMOVED = "ACL 1.0 was removed in Apache 5.3.3; use authenticationEnabled/authorizationEnabled (docs/acl.md)"


@dataclass
class PlannedFeatures:
    """Apache keys of features FerryMQ does not have: each must stay false, so that a file asking for
    replication or ACL 1.0 is refused instead of running without it."""

    aclEnable: bool = key(False, "Apache 4.x/5.x ACL 1.0.", check=equal_to(False, _ACL_V1_REMOVED))
    enableDLegerCommitLog: bool = key(
        False, "Apache's DLedger (Raft) commit log.", check=equal_to(False, f"{NO_REPLICATION}; leave it false")
    )
    enableSlaveActingMaster: bool = key(
        False, "Apache 5.x slave acting as master.", check=equal_to(False, f"{NO_REPLICATION}; leave it false")
    )
    recallMessageEnable: bool = key(
        False, "Apache 5.x's recall of a delayed message by its recall handle (RecallMessage, docs/grpc.md).",
        check=equal_to(False, "recalling a delayed message is not implemented yet in FerryMQ; leave it false")
    )


#: Apache's class names for its built-in providers: the behaviour FerryMQ has, so these values are accepted.
_PROVIDER_HELP = "Apache's provider class; FerryMQ has the built-in local one (any value is accepted)."


@dataclass
class AuthConfig:
    """Access control (Apache 5.x's AuthConfig keys, read from the broker's file; docs/acl.md)."""

    authenticationEnabled: bool = key(False, "Refuse requests not signed by an enabled user (NO_PERMISSION).")
    authorizationEnabled: bool = key(False, "Refuse requests whose user has no ACL allowing the action.")
    authenticationWhitelist: str = key("", "Request codes served without credentials, comma-separated.",
                                       check=code_list)
    authorizationWhitelist: str = key("", "Request codes served without an ACL check, comma-separated.",
                                      check=code_list)
    initAuthenticationUser: str = key(
        "", 'Super user created at first start, JSON {"username":"...","password":"..."}.',
        check=json_object("username", "password"), secret=True)
    innerClientAuthenticationCredentials: str = key(
        "", 'Credentials of the broker\'s own requests, JSON {"accessKey":"...","secretKey":"..."}; created as '
            "a super user.", check=json_object("accessKey", "secretKey"), secret=True)
    migrateAuthFromV1Enabled: bool = key(
        False, "At start, make the ACL 1.0 accounts of $ROCKETMQ_HOME/conf/plain_acl.yml (and conf/acl/*.yml) "
               "users and ACLs, unless a user of that name exists.")
    metricsAuthEnabled: bool = key(
        False, "Require HTTP Basic credentials of an enabled user on /metrics (httpListenPort), which is open by "
               "default as Prometheus scrapes it; needs authenticationEnabled.")
    authenticationProvider: str = key("", _PROVIDER_HELP)
    authenticationMetadataProvider: str = key("", _PROVIDER_HELP)
    authenticationStrategy: str = key("", _PROVIDER_HELP)
    authorizationProvider: str = key("", _PROVIDER_HELP)
    authorizationMetadataProvider: str = key("", _PROVIDER_HELP)
    authorizationStrategy: str = key("", _PROVIDER_HELP)

    def __post_init__(self) -> None:
        if self.metricsAuthEnabled and not self.authenticationEnabled:
            raise ConfigError("metricsAuthEnabled=true: needs authenticationEnabled=true (without it no user's "
                              "credentials are checked)")

    @property
    def enabled(self) -> bool:
        return self.authenticationEnabled or self.authorizationEnabled

    @property
    def inner_credentials(self) -> Credentials | None:
        """What the broker's own clients sign with (its slave sync, name server registration, the gateways
        and the gRPC service in its process); None when ``innerClientAuthenticationCredentials`` is blank or
        lacks a key, as Apache's ``BrokerOuterAPI`` then signs nothing."""
        if not self.innerClientAuthenticationCredentials.strip():
            return None
        obj = json.loads(self.innerClientAuthenticationCredentials)
        access_key, secret_key = obj.get("accessKey") or "", obj.get("secretKey") or ""
        if not access_key.strip() or not secret_key.strip():
            return None
        return Credentials(access_key, secret_key)


#: the HTTP gateway's default port (``httpListenPort``)
HTTP_PORT = 8080
#: the MQTT gateway's default port (``mqttListenPort``), MQTT's registered port
MQTT_PORT = 1883
#: the gRPC MessagingService's default port (``grpcListenPort``), Apache's proxy's grpcServerPort
GRPC_PORT = 8081


@dataclass
class GatewayConfig:
    """The gateways and protocols a broker process serves beside the remoting protocol (docs/http.md,
    docs/mqtt.md, docs/grpc.md)."""

    httpListenPort: int = key(HTTP_PORT, "Port of the HTTP gateway (docs/http.md), on bindAddress; 0 turns it off.",
                              check=port)
    mqttListenPort: int = key(MQTT_PORT, "Port of the MQTT gateway (docs/mqtt.md), on bindAddress; 0 turns it off.",
                              check=port)
    grpcListenPort: int = key(GRPC_PORT, "Port of the RocketMQ 5 gRPC MessagingService (docs/grpc.md), on "
                                         "bindAddress; 0 turns it off. Needs the grpc extra installed.", check=port)
    httpTlsEnable: bool = key(
        False, "Serve the HTTP gateway over HTTPS only, with tls.server.certPath/keyPath/keyPassword (and client "
        "certificates checked against tls.server.trustCertPath when tls.server.need.client.auth asks for them).")
    mqttTlsListenPort: int = key(
        0, "Port of the MQTT gateway over TLS (conventionally 8883), beside mqttListenPort, with the certificate "
        "and key of tls.server.certPath/keyPath; 0 turns it off.", check=port)
    httpEventLoop: str = key(
        "BROKER", "Where a broker process serves its HTTP gateway: BROKER, on the broker's own event loop (the "
        "reactor is then Twisted's asyncio reactor on uvloop: a publish runs in one thread from request to "
        "store), or OWN_THREAD, on a loop of its own in a thread beside the broker's reactor (docs/benchmarks.md, "
        "\"HTTP gateway\", has both's figures).",
        check=one_of("BROKER", "OWN_THREAD"))
    grpcEventLoop: str = key(
        "BROKER", "Where a broker process serves gRPC: BROKER, on the broker's own event loop (the reactor is then "
        "Twisted's asyncio reactor on uvloop: a call runs in one thread from request to store), or OWN_THREAD, on "
        "an asyncio loop of its own in a thread beside the broker's epoll reactor, what a call asks of the broker "
        "hopping to the reactor thread and back. Both serve the port with FerryMQ's own HTTP/2 transport, TLS and "
        "PROXY headers alike (docs/grpc.md).", check=one_of("BROKER", "OWN_THREAD"))
    httpCheckBackSecret: str = key("", "HMAC-SHA256 key signing the HTTP gateway's transaction check-back calls "
                                       "(docs/http.md); empty refuses transactional publishes over HTTP.",
                                   secret=True)
    httpCheckBackTimeout: int = key(3_000, "Milliseconds a check-back receiver has to answer before the answer "
                                           "counts as UNKNOWN.", check=positive)

    consoleEnabled: bool = key(True, "Serve the web console (docs/console.md) under /console on httpListenPort.")
    consoleSampleInterval: int = key(5_000, "Milliseconds between the web console's samples of the cluster's put "
                                            "and get totals (its TPS plot).", check=positive)

    def transaction_options(self) -> dict[str, object]:
        """The :class:`ferrymq.gateways.http.gateway.Gateway` keyword arguments of the check-back keys."""
        return {"check_back_secret": self.httpCheckBackSecret, "check_back_timeout": self.httpCheckBackTimeout / 1000}

    def console_options(self) -> dict[str, object]:
        """The :class:`ferrymq.gateways.http.gateway.Gateway` keyword argument of the console keys."""
        return {"console_sample_interval": self.consoleSampleInterval / 1000 if self.consoleEnabled else None}


@dataclass
class StandaloneConfig:
    """``ferrymq standalone``'s own key: one file configures both servers, listenPort being the broker's."""

    namesrvListenPort: int = key(NAMESRV_PORT, "The in-process name server's port.", check=port)


def namesrv_config(props: dict[str, str], source: str | None = None) -> tuple[NamesrvConfig, NettyServerConfig]:
    """The name server's two config objects from one property set, as Apache's NamesrvStartup does."""
    namesrv = from_properties(NamesrvConfig, props)
    netty = from_properties(NettyServerConfig, props, listenPort=NAMESRV_PORT)
    if source is not None and "configStorePath" not in props:
        namesrv.configStorePath = source
    return namesrv, netty
