import Observability
import Support

/// Every setting PushChat processes read. In `config/pushchat.json` a key is written in lower case
/// (`database_url`); in the environment it is the `PUSHCHAT_`-prefixed upper-case name (`PUSHCHAT_DATABASE_URL`),
/// which wins over the file.
public enum ConfigurationKey: String, CaseIterable, Sendable {
    case databaseURL = "database_url"
    case apiHost = "api_host"
    case apiPort = "api_port"
    case logFile = "log_file"
    case logLevel = "log_level"
    case logFormat = "log_format"
    case pollInterval = "poll_interval"
    case migrationsDirectory = "migrations_dir"
    case apiRatePerIP = "api_rate_per_ip"
    case apiBurstPerIP = "api_burst_per_ip"
    case apiRatePerUDID = "api_rate_per_udid"
    case apiBurstPerUDID = "api_burst_per_udid"
    case apiMaxRoomSize = "api_max_room_size"
    case apiMaxBody = "api_max_body"
    case apiMaxJSONBody = "api_max_json_body"
    case apiTestPages = "api_test_pages"
    case apiTLSCertificate = "api_tls_certificate"
    case apiTLSKey = "api_tls_key"
    case apiFanoutPerIP = "api_fanout_per_ip"
    case apiFanoutPerUDID = "api_fanout_per_udid"
    case apiMaxConnectionsPerIP = "api_max_connections_per_ip"
    case apiHeaderTimeout = "api_header_timeout"
    case apiBodyTimeout = "api_body_timeout"
    case apiIdleTimeout = "api_idle_timeout"
    case apiTrustedProxies = "api_trusted_proxies"
    case apiMetricsHost = "api_metrics_host"
    case apiMetricsPort = "api_metrics_port"
    case databaseStatementTimeout = "database_statement_timeout"
    case databaseLockTimeout = "database_lock_timeout"
    case databaseConnections = "database_connections"
    case databaseListenURL = "database_listen_url"
    case feedbackMaxPrune = "feedback_max_prune"
    case retentionMessages = "retention_messages"
    case retentionTokenlessUsers = "retention_tokenless_users"
    case retentionInvalidTokens = "retention_invalid_tokens"
    case pushStatusHost = "push_status_host"
    case pushStatusPort = "push_status_port"
    case apnsGateway = "apns_gateway"
    case apnsFeedback = "apns_feedback"
    case apnsCertificate = "apns_certificate"
    case apnsPassphrase = "apns_passphrase"
    case apnsCAFile = "apns_ca_file"
    case apnsTransport = "apns_transport"
    case apnsHost = "apns_host"
    case apnsKeyFile = "apns_key_file"
    case apnsKeyID = "apns_key_id"
    case apnsTeamID = "apns_team_id"
    case apnsTopic = "apns_topic"
    case pushRequestTimeout = "push_request_timeout"
    case apnsConnections = "apns_connections"
    case apnsConnectionIdle = "apns_connection_idle"
    case apnsExpiry = "apns_expiry"
    case apnsPriority = "apns_priority"
    case pushBatchSize = "push_batch_size"
    case pushWindow = "push_window"
    case pushLease = "push_lease"
    case pushSettle = "push_settle"
    case pushMaxRetries = "push_max_retries"
    case pushStallTimeout = "push_stall_timeout"

    /// The key as written in the configuration file.
    public var fileKey: String { rawValue }

    /// The environment variable that overrides the key.
    public var environmentName: String { "PUSHCHAT_" + rawValue.uppercased() }
}
