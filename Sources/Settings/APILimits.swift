import Observability
package import Support

/// The API's abuse limits: one `message` to a big room is an amplifier.
package struct APILimits: Sendable {
    /// Requests per second per client address (`api_rate_per_ip`; 0: no limit). Default 20.
    package var ratePerIP: Double = 20
    /// Requests a client address may send at once (`api_burst_per_ip`). Default 40.
    package var burstPerIP: Double = 40
    /// Requests per second per device (`api_rate_per_udid`; 0: no limit). Default 5.
    package var ratePerUDID: Double = 5
    /// Requests a device may send at once (`api_burst_per_udid`). Default 10.
    package var burstPerUDID: Double = 10
    /// Most devices in one room (`api_max_room_size`; 0: no limit): a `join` into a full room is refused. Default 10000.
    package var maxRoomSize = 10_000
    /// Largest request body in bytes (`api_max_body`); larger bodies get 413. Default 64 KiB.
    package var maxBodyBytes = 64 * 1024
    /// Largest provider API (`/v1`) request body in bytes (`api_max_json_body`); larger bodies get 413. Default 1 MiB:
    /// a notification to 10,000 tokens fits.
    package var maxJSONBodyBytes = 1 << 20
    /// Recipients above which a provider notification to all, a room or users is accepted at once and queued in the
    /// background by the push daemons (`api_background_recipients`, 0 to 1,000,000). Default 1,000.
    package var backgroundRecipients = 1_000
    /// Notifications one app may have waiting before the provider API refuses more for it with 429
    /// (`api_app_max_backlog`; 0: no limit): rows queued and not yet sent or failed, and broadcast recipients not yet
    /// expanded. Read every few seconds, not per request. Default 10,000,000: one app's flood cannot fill the disk.
    package var appMaxBacklog = 10_000_000
    /// Notifications (recipients, not requests) one client address may queue per minute (`api_fanout_per_ip`; 0: no
    /// limit). Default 20,000: at most that many in any minute, half of it at once.
    package var fanOutPerIP: Double = 20_000
    /// The same per device (`api_fanout_per_udid`). Default 10,000.
    package var fanOutPerUDID: Double = 10_000
    /// Connections open at once from one client address (`api_max_connections_per_ip`; 0: no limit, behind a proxy
    /// that is every client). Default 64.
    package var maxConnectionsPerIP = 64
    /// Connections open at once from all addresses together (`api_max_connections`; 0: no limit), well below the
    /// units' `LimitNOFILE=65536`, so a flood from many addresses cannot take every descriptor. Default 10,000.
    package var maxConnections = 10_000
    /// How many leading bits group IPv6 clients for every per-address limit (`api_ipv6_prefix`, 32 to 128): a host
    /// picks any address in its network, so keying by the full address would give it 2^64 budgets. Default 64 (one
    /// subscriber's LAN); 56 where providers hand each subscriber a /56.
    package var ipv6Prefix = 64
    /// How long a client may take to send a request's head (`api_header_timeout`), its body (`api_body_timeout`),
    /// and how long a kept-alive connection may sit idle (`api_idle_timeout`). Defaults 30 s, 30 s, 60 s.
    package var headerTimeout: Duration = .seconds(30)
    package var bodyTimeout: Duration = .seconds(30)
    package var idleTimeout: Duration = .seconds(60)
    /// Proxies whose `X-Forwarded-For` is believed (`api_trusted_proxies`: CIDRs, comma-separated). Default none.
    package var trustedProxies: [CIDR] = []

    package init() {}

    /// No limits at all (tests and benchmarks that measure something else).
    package static var unlimited: APILimits {
        var limits = APILimits()
        limits.ratePerIP = 0
        limits.ratePerUDID = 0
        limits.maxRoomSize = 0
        limits.fanOutPerIP = 0
        limits.fanOutPerUDID = 0
        limits.maxConnectionsPerIP = 0
        limits.maxConnections = 0
        limits.appMaxBacklog = 0
        return limits
    }

    init(source: ConfigurationSource) throws(ConfigurationError) {
        ratePerIP = try Self.number(.apiRatePerIP, source) ?? ratePerIP
        burstPerIP = try Self.number(.apiBurstPerIP, source) ?? burstPerIP
        ratePerUDID = try Self.number(.apiRatePerUDID, source) ?? ratePerUDID
        burstPerUDID = try Self.number(.apiBurstPerUDID, source) ?? burstPerUDID
        if let size = try Self.number(.apiMaxRoomSize, source) {
            guard size == size.rounded() else { throw Configuration.invalid(.apiMaxRoomSize, source, "expected a whole number") }
            maxRoomSize = Int(size)
        }
        fanOutPerIP = try Self.number(.apiFanoutPerIP, source) ?? fanOutPerIP
        fanOutPerUDID = try Self.number(.apiFanoutPerUDID, source) ?? fanOutPerUDID
        if let count = try Self.number(.apiMaxConnectionsPerIP, source) {
            guard count == count.rounded() else { throw Configuration.invalid(.apiMaxConnectionsPerIP, source, "expected a whole number") }
            maxConnectionsPerIP = Int(count)
        }
        if let count = try Self.number(.apiMaxConnections, source) {
            guard count == count.rounded() else { throw Configuration.invalid(.apiMaxConnections, source, "expected a whole number") }
            maxConnections = Int(count)
        }
        ipv6Prefix = try Configuration.integer(.apiIPv6Prefix, source, in: 32...128) ?? ipv6Prefix
        headerTimeout = try Configuration.duration(.apiHeaderTimeout, source, maximum: .seconds(300)) ?? headerTimeout
        bodyTimeout = try Configuration.duration(.apiBodyTimeout, source, maximum: .seconds(300)) ?? bodyTimeout
        idleTimeout = try Configuration.duration(.apiIdleTimeout, source, maximum: .seconds(600)) ?? idleTimeout
        if let text = source.value(.apiTrustedProxies) {
            var networks: [CIDR] = []
            for entry in text.split(separator: ",").map({ $0.trimmingWhitespace() }) where !entry.isEmpty {
                guard let network = CIDR(entry) else {
                    throw Configuration.invalid(
                        .apiTrustedProxies,
                        source,
                        "'\(entry)' is not an address or network (e.g. 127.0.0.1/32, 10.0.0.0/8, ::1)"
                    )
                }
                networks.append(network)
            }
            trustedProxies = networks
        }
        if let text = source.value(.apiMaxBody) {
            guard let bytes = Int(text), (256...(16 << 20)).contains(bytes) else {
                throw Configuration.invalid(.apiMaxBody, source, "expected a number of bytes from 256 to 16777216, got '\(text)'")
            }
            maxBodyBytes = bytes
        }
        if let text = source.value(.apiMaxJSONBody) {
            guard let bytes = Int(text), (4096...(64 << 20)).contains(bytes) else {
                throw Configuration.invalid(.apiMaxJSONBody, source, "expected a number of bytes from 4096 to 67108864, got '\(text)'")
            }
            maxJSONBodyBytes = bytes
        }
        backgroundRecipients = try Configuration.integer(.apiBackgroundRecipients, source, in: 0...1_000_000) ?? backgroundRecipients
        appMaxBacklog = try Configuration.integer(.apiAppMaxBacklog, source, in: 0...1_000_000_000) ?? appMaxBacklog
    }

    private static func number(_ key: ConfigurationKey, _ source: ConfigurationSource) throws(ConfigurationError) -> Double? {
        guard let text = source.value(key) else { return nil }
        guard let value = Double(text), value >= 0, value.isFinite else {
            throw Configuration.invalid(key, source, "expected a number ≥ 0 (0: no limit), got '\(text)'")
        }
        return value
    }
}
