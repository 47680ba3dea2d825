package import NIOCore
package import Support

/// A browser's push service is a host the browser named, never this server: registering a subscription and every send
/// check where its endpoint points (RFC 8030 leaves the choice to the browser; an attacker's "browser" can name any
/// URL). A host that is, or resolves to, a loopback, private, link-local, unique-local or cloud-metadata address is
/// refused unless `webpush_private_hosts` lists its `host:port` (tests, the simulator).
extension WebPushSubscription {
    /// `host:port` (an IPv6 literal in brackets), as `webpush_private_hosts` lists it.
    package var authority: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }

    /// Whether `privateHosts` lists the endpoint's `host:port`.
    package func isListed(in privateHosts: Set<String>) -> Bool {
        privateHosts.contains(authority.lowercased()) || privateHosts.contains("\(host.lowercased()):\(port)")
    }

    /// Refuses the endpoint when any address its host resolves to is inside the network (a name with one public and
    /// one private address could be connected to either); unless listed.
    package func check(resolved addresses: [ClientAddress], privateHosts: Set<String>) throws(WebPushError) {
        guard !isListed(in: privateHosts) else { return }
        guard !addresses.isEmpty else { throw WebPushError(code: .badEndpoint, reason: "\(host) does not resolve to any address") }
        for address in addresses {
            let scope = AddressScope(address)
            guard scope.isPublic else {
                throw WebPushError(
                    code: .insideNetwork,
                    reason:
                        "the endpoint \(authority) points inside the network (\(address): \(scope)); list it in webpush_private_hosts to allow it"
                )
            }
        }
    }

    /// The endpoint's addresses, every one checked (an IP literal is not resolved): what a connection may be made to,
    /// so that the check and the connection see the same address.
    package func checkedAddresses(privateHosts: Set<String>) async throws(WebPushError) -> [SocketAddress] {
        let addresses: [SocketAddress]
        do {
            if ClientAddress(host) != nil {
                addresses = [try SocketAddress(ipAddress: host, port: port)]
            } else {
                addresses = try await HostResolver.resolve(host: host, port: port)
            }
        } catch let error as HostResolver.Failure {
            throw WebPushError(code: .badEndpoint, reason: error.description)
        } catch {
            throw WebPushError(code: .badEndpoint, reason: "\(host) does not resolve: \(error)")
        }
        try check(resolved: addresses.compactMap { $0.ipAddress.flatMap(ClientAddress.init) }, privateHosts: privateHosts)
        return addresses
    }
}
