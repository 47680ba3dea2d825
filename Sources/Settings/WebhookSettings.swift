import Foundation
import Support

/// How the push daemon delivers webhooks' events (issue 45): which receivers may be inside the network, how long a
/// POST may take, and how failures are retried.
package struct WebhookSettings: Sendable {
    /// `host:port` pairs a webhook may point at although they are inside the network (loopback, private, link-local
    /// addresses), and over http (`webhook_private_hosts`, comma-separated). Default none.
    package var privateHosts: Set<String> = []
    /// How long a POST may take, connection included, before it counts as failed (`webhook_timeout`). Default 10 s.
    package var timeout: Duration = .seconds(10)
    /// The wait after a webhook's first failed POST, doubling with each failure in a row up to 6 h, with jitter
    /// (`webhook_retry_first`). Default 10 s.
    package var retryFirst: Duration = .seconds(10)
    /// How long a webhook may fail in a row before it is disabled (`webhook_retry_window`). Default 3 days.
    package var retryWindow: Duration = .seconds(3 * 24 * 3600)
    /// POSTs under way at once to one webhook (`webhook_concurrency`). Default 4.
    package var concurrency = 4
    /// While the daemon drains a broadcast at full speed, only events at least this old are POSTed
    /// (`webhook_broadcast_lag`; 0: at once): the notifications have the machine first. Default 30 s.
    package var broadcastLag: Duration = .seconds(30)
    /// A PEM file of the certificate authorities a receiver's https certificate may chain to, instead of the system's
    /// (`webhook_ca_file`). Default: the system's.
    package var caFile: String?

    package init() {}

    init(source: ConfigurationSource) throws(ConfigurationError) {
        privateHosts = try Configuration.hostPorts(.webhookPrivateHosts, source) ?? privateHosts
        timeout = try Configuration.duration(.webhookTimeout, source, maximum: .seconds(120)) ?? timeout
        retryFirst = try Configuration.duration(.webhookRetryFirst, source) ?? retryFirst
        retryWindow = try Configuration.duration(.webhookRetryWindow, source) ?? retryWindow
        concurrency = try Configuration.integer(.webhookConcurrency, source, in: 1...64) ?? concurrency
        broadcastLag =
            try Configuration.duration(.webhookBroadcastLag, source, zeroMeans: "at once", maximum: .seconds(3600)) ?? broadcastLag
        caFile = try Configuration.absolutePath(.webhookCAFile, source)
    }
}
