package import Foundation
package import Support

/// A receiver's URL, checked before it is stored and again before each POST: https (http only for a host the
/// operator listed), no credentials in it, and a host that is not, and does not resolve to, an address inside the
/// network (loopback, private, link-local, cloud metadata, …: ``AddressScope``) unless listed in
/// `webhook_private_hosts` (`host:port`, for tests and receivers inside the operator's own network).
package struct WebhookURL: Sendable, Equatable, CustomStringConvertible {
    package let url: URL
    package let scheme: String
    /// Lowercased; an IPv6 literal without its brackets.
    package let host: String
    package let port: Int
    /// The path and query the POST goes to (`/` when empty).
    package let target: String

    /// Parses `text` and applies the rules that need no DNS: scheme, credentials, the host's form, a literal address's
    /// scope. `privateHosts`: the `host:port` pairs allowed inside the network (and over http).
    package init(parsing text: String, privateHosts: Set<String> = []) throws {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw WebhookError(code: .badURL, reason: "not a URL: \(JSONText.quoted(text))")
        }
        guard scheme == "https" || scheme == "http" else {
            throw WebhookError(code: .badURL, reason: "a webhook URL is https (not \(scheme)): \(JSONText.quoted(text))")
        }
        guard components.user == nil, components.password == nil else {
            throw WebhookError(code: .badURL, reason: "a webhook URL carries no user or password (the signature authenticates the POST)")
        }
        guard components.fragment == nil else {
            throw WebhookError(code: .badURL, reason: "a webhook URL has no #fragment")
        }
        guard var host = components.host?.lowercased(), !host.isEmpty, let url = components.url else {
            throw WebhookError(code: .badURL, reason: "a webhook URL names a host: \(JSONText.quoted(text))")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        guard (1...65535).contains(port) else {
            throw WebhookError(code: .badURL, reason: "port \(port) is out of range")
        }
        self.url = url
        self.scheme = scheme
        self.host = host
        self.port = port
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        self.target = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        let listed = isListed(in: privateHosts)
        if scheme == "http", !listed {
            throw WebhookError(
                code: .badURL,
                reason: "a webhook URL is https; http only for a host listed in webhook_private_hosts (\(authority) is not)"
            )
        }
        if !listed, let address = ClientAddress(host) { try Self.check(address, of: authority) }
    }

    /// `host:port` (an IPv6 literal in brackets), as `webhook_private_hosts` lists it.
    package var authority: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }

    package var description: String { url.absoluteString }

    /// Whether `privateHosts` lists this URL's `host:port`.
    package func isListed(in privateHosts: Set<String>) -> Bool {
        privateHosts.contains(authority) || privateHosts.contains("\(host):\(port)")
    }

    /// Refuses the URL if any of the addresses its host resolves to is inside the network (every one is checked: a
    /// name with one public and one private address could be connected to either). Unless listed.
    package func check(resolved addresses: [ClientAddress], privateHosts: Set<String>) throws {
        guard !isListed(in: privateHosts) else { return }
        guard !addresses.isEmpty else {
            throw WebhookError(code: .badURL, reason: "\(host) does not resolve to any address")
        }
        for address in addresses { try Self.check(address, of: authority) }
    }

    static func check(_ address: ClientAddress, of authority: String) throws {
        let scope = AddressScope(address)
        guard scope.isPublic else {
            throw WebhookError(
                code: .insideNetwork,
                reason: "\(authority) points inside the network (\(address): \(scope)); list it in webhook_private_hosts to allow it"
            )
        }
    }
}
