import Foundation
import Support

/// How the services reach browsers' push services (Web Push, issue 46): the application server's VAPID key and
/// contact, which push services may be inside the network, and whose certificates to trust.
package struct WebPushSettings: Sendable {
    /// The VAPID key (`webpush_vapid_key_file`): a P-256 private key in PEM, as `openssl ecparam -name prime256v1
    /// -genkey -noout` or `pushchat-api webpush generate-key` writes it. Its public half is the `applicationServerKey`
    /// pages subscribe with. Default none: no browser can be reached.
    package var vapidKeyFile: String?
    /// Whom push services may contact about this sender (`webpush_subject`): `mailto:` an address or an `https:` URL.
    package var subject: String?
    /// `host:port` pairs a push service may be at although they are inside the network (loopback, private,
    /// link-local, unique-local addresses): tests and the simulator (`webpush_private_hosts`). Default none.
    package var privateHosts: Set<String> = []
    /// A PEM file of extra certificate authorities a push service's certificate may chain to (`webpush_ca_file`): the
    /// simulator's CA. Default: the system's only.
    package var caFile: String?
    /// The VAPID key's public half (`webpush_public_key`, base64url of the uncompressed point, as `pushchat-api webpush
    /// generate-key` prints it): what the API serves to pages when it may not read the key file (the guide keeps
    /// the private key from the API's user). Default: derived from `webpush_vapid_key_file` where it can be read.
    package var publicKey: String?
    /// Push services' connections a sender's link keeps open with nothing in flight (`webpush_max_connections`):
    /// beyond it, the least recently used idle one closes when another push service is needed. Each also closes after
    /// `apns_connection_idle` without work. Default 64.
    package var maxConnections = 64

    package init() {}

    init(source: ConfigurationSource) throws(ConfigurationError) {
        vapidKeyFile = try Configuration.absolutePath(.webPushVAPIDKeyFile, source)
        if let subject = source.value(.webPushSubject) {
            let lower = subject.lowercased()
            guard (lower.hasPrefix("mailto:") && subject.contains("@")) || (lower.hasPrefix("https://") && subject.count > 8) else {
                throw Configuration.invalid(.webPushSubject, source, "expected mailto:ADDRESS or an https: URL, got '\(subject)'")
            }
            self.subject = subject
        }
        privateHosts = try Configuration.hostPorts(.webPushPrivateHosts, source) ?? privateHosts
        caFile = try Configuration.absolutePath(.webPushCAFile, source)
        maxConnections = try Configuration.integer(.webPushMaxConnections, source, in: 1...10_000) ?? maxConnections
        if let key = source.value(.webPushPublicKey) {
            let alphabet = key.utf8.allSatisfy { byte in
                (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == 0x2D || byte == 0x5F
            }
            guard key.utf8.count == 87, key.hasPrefix("B"), alphabet else {
                throw Configuration.invalid(
                    .webPushPublicKey,
                    source,
                    "expected the base64url public key generate-key printed (87 characters), got '\(key)'"
                )
            }
            publicKey = key
        }
    }
}
