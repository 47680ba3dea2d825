import Observability
import Support

/// The push daemon's tuning: connections, defaults for notifications, batch and window sizes, leases.
package struct PushSettings: Sendable {
    /// Connections to the gateway that share the work (`apns_connections`). Binary: that many, always open. HTTP/2:
    /// the most; the first is always open, each other one opens while the open ones' streams are all busy with rows
    /// waiting (one connection carries at most MAX_CONCURRENT_STREAMS per round trip to Apple) and closes after
    /// `apns_connection_idle` without work. Default 1 for binary, 4 for HTTP/2.
    package var connections = 1
    /// HTTP/2: how long an extra connection may go without work before it closes (`apns_connection_idle`). Default 30 s.
    package var connectionIdle: Duration = .seconds(30)
    /// Seconds APNs keeps trying to deliver a notification whose row sets no expiration (`apns_expiry`);
    /// 0 = deliver once, do not store. Default one day.
    package var expirySeconds: UInt32 = 86_400
    /// Priority for rows that set none (`apns_priority`): 10 now, 5 power-considerate. Default 10.
    package var priority: UInt8 = 10
    /// Rows claimed per statement (`push_batch_size`). Default 2000.
    package var batchSize = 2000
    /// The largest claim while a connection's writer waits for rows (`push_batch_max`): claims grow from
    /// `push_batch_size` up to this while a backlog drains faster than they bring it. Default 4 × `push_batch_size`
    /// (at most 50000); `push_batch_size` turns the growth off.
    package var batchMax = 8000
    /// Notifications in flight per connection, not yet known accepted (`push_window`); bounds memory (about 300 bytes
    /// each with the row). With the settle time it caps one binary connection's rate: window / settle per second
    /// (200,000/s at the defaults). Default 100000.
    package var window = 100_000
    /// How long a claim keeps other daemons off a row (`push_lease`); renewed while in flight. Default 30 s.
    /// Rows claimed by a daemon that died are sent again after at most this long.
    package var lease: Duration = .seconds(30)
    /// How long a written notification waits for an error response before it counts as accepted (`push_settle`).
    /// Default 0.5 s.
    package var settle: Duration = .milliseconds(500)
    /// Resends after a processing error (status 1 or 255) before a row is failed (`push_max_retries`). Default 3.
    package var maxRetries = 3
    /// Writes to APNs after which a retryable answer (HTTP/2 429 or 5xx) fails the row (`push_max_attempts`). Default 10.
    package var maxAttempts = 10
    /// Age after which a retryable answer fails a row without an expiration of its own (`push_max_age`). Default 24 h.
    package var maxAge: Duration = .seconds(86_400)
    /// Where the daemon serves `/healthz`, `/readyz` and `/metrics` (`push_status_host`). Default 127.0.0.1:
    /// loopback only.
    package var statusHost = "127.0.0.1"
    /// The status listener's port (`push_status_port`; 0: any free port). Default 44448.
    package var statusPort = 44448
    /// HTTP/2: how long one request may wait for its answer before it is cancelled and resent
    /// (`push_request_timeout`). Default 10 s.
    package var requestTimeout: Duration = .seconds(10)
    /// Binary: a gateway that takes no bytes for this long while a write waits (it stopped reading) is treated as a
    /// dead connection: closed, its window sent again on a new one (`push_stall_timeout`). Default 30 s.
    package var stallTimeout: Duration = .seconds(30)
    /// Broadcast rows (`push_queue.bulk`) this daemon sends per second at most, over all its connections
    /// (`push_broadcast_rate`; 0: as fast as the gateway takes them): spreads a broadcast out, for the gateways and
    /// for the app's backend when the phones open the app at once. Other notifications are never held back. Default 0.
    package var broadcastRate = 0
    /// Chat first: while the interactive lane's claims (a chat row's statement and its commit) take longer than this
    /// at the median, a broadcast draining meanwhile is slowed until they do not (never below 1,000 rows/s), and goes
    /// at full pace again once chat is quiet (`push_chat_target`, e.g. `10ms`; 0: broadcasts never yield). Default 0.
    package var chatTarget: Duration = .zero
    /// Chat first on a busy machine: a broadcast's connections and their claimer and writer tasks run on threads of
    /// their own at this niceness (`push_broadcast_nice`, 0–19; 0: on the daemon's shared threads), so that while the
    /// cores are all busy the operating system gives chat's threads the CPU first; with cores to spare it changes
    /// nothing. Default 10.
    package var broadcastNice = 10

    package init() {}

    init(source: ConfigurationSource) throws(ConfigurationError) {
        connections = try Configuration.integer(.apnsConnections, source, in: 1...64) ?? connections
        connectionIdle = try Configuration.duration(.apnsConnectionIdle, source) ?? connectionIdle
        expirySeconds = try Configuration.integer(.apnsExpiry, source, in: 0...Int(UInt32.max)).map(UInt32.init) ?? expirySeconds
        if let value = try Configuration.integer(.apnsPriority, source, in: 5...10) {
            guard value == 5 || value == 10 else {
                throw Configuration.invalid(.apnsPriority, source, "expected 10 (now) or 5 (power-considerate), got \(value)")
            }
            priority = UInt8(value)
        }
        batchSize = try Configuration.integer(.pushBatchSize, source, in: 1...50_000) ?? batchSize
        batchMax = min(batchSize * 4, 50_000)
        if let value = try Configuration.integer(.pushBatchMax, source, in: 1...50_000) {
            guard value >= batchSize else {
                throw Configuration.invalid(.pushBatchMax, source, "expected at least push_batch_size (\(batchSize)), got \(value)")
            }
            batchMax = value
        }
        window = try Configuration.integer(.pushWindow, source, in: 1...1_000_000) ?? window
        lease = try Configuration.duration(.pushLease, source) ?? lease
        settle = try Configuration.duration(.pushSettle, source) ?? settle
        maxRetries = try Configuration.integer(.pushMaxRetries, source, in: 0...100) ?? maxRetries
        maxAttempts = try Configuration.integer(.pushMaxAttempts, source, in: 1...1000) ?? maxAttempts
        maxAge = try Configuration.duration(.pushMaxAge, source) ?? maxAge
        if let host = source.value(.pushStatusHost) {
            guard !host.isEmpty, !host.contains(where: \.isWhitespace) else {
                throw Configuration.invalid(.pushStatusHost, source, "expected a host name or IP address")
            }
            statusHost = host
        }
        statusPort = try Configuration.integer(.pushStatusPort, source, in: 0...65535) ?? statusPort
        requestTimeout = try Configuration.duration(.pushRequestTimeout, source) ?? requestTimeout
        stallTimeout = try Configuration.duration(.pushStallTimeout, source) ?? stallTimeout
        broadcastRate = try Configuration.integer(.pushBroadcastRate, source, in: 0...10_000_000) ?? broadcastRate
        chatTarget =
            try Configuration.duration(.pushChatTarget, source, zeroMeans: "broadcasts never yield to chat", maximum: .seconds(10))
            ?? chatTarget
        broadcastNice = try Configuration.integer(.pushBroadcastNice, source, in: 0...19) ?? broadcastNice
        guard lease > settle * 4 else {
            throw Configuration.invalid(.pushLease, source, "must be well above push_settle (at least 4 times)")
        }
    }
}
