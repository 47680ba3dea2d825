#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A client's IP address, as the limits key it: IPv4 whole, IPv6 by its /64 (one subscriber's network: a host
/// picks any address in it, so keying by the full address would give it 2^64 budgets).
package struct ClientAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 or 16 bytes.
    package let bytes: [UInt8]

    package init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// `203.0.113.7`, `2001:db8::1`, `::ffff:203.0.113.7` (an IPv4 client of a dual-stack socket: keyed as IPv4).
    package init?(_ text: String) {
        let text = text.trimmingWhitespace()
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes.prefix(10).allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            self.bytes = Array(bytes.suffix(4))
        } else {
            self.bytes = bytes
        }
    }

    package var isIPv6: Bool { bytes.count == 16 }

    /// The key of every limit: the address itself for IPv4, its /64 network for IPv6.
    package var limitKey: String { limitKey(ipv6Prefix: 64) }

    /// The address itself for IPv4; for IPv6 its network of `ipv6Prefix` bits (`api_ipv6_prefix`: a /56 when the
    /// clients' providers hand whole /56s to subscribers), as `2001:db8:0:100::/56`.
    package func limitKey(ipv6Prefix: Int) -> String {
        guard isIPv6 else { return description }
        var masked = bytes
        for index in 0..<16 {
            let keep = max(0, min(8, ipv6Prefix - index * 8))
            masked[index] &= keep == 8 ? 0xFF : UInt8(truncatingIfNeeded: 0xFF << (8 - keep))
        }
        let hextets = stride(from: 0, to: 16, by: 2).map { String(UInt16(masked[$0]) << 8 | UInt16(masked[$0 + 1]), radix: 16) }
        let shown = (ipv6Prefix + 15) / 16
        return hextets.prefix(shown).joined(separator: ":") + (shown < 8 ? "::" : "") + "/\(ipv6Prefix)"
    }

    package var description: String {
        if !isIPv6 { return bytes.map(String.init).joined(separator: ".") }
        var storage = bytes
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        return storage.withUnsafeMutableBytes { raw in
            inet_ntop(AF_INET6, raw.baseAddress, &text, socklen_t(text.count)) != nil ? String(cString: text) : "?"
        }
    }
}

/// A network in CIDR notation (`10.0.0.0/8`, `::1/128`, or a single address), for `api_trusted_proxies`.
package struct CIDR: Sendable, Hashable, CustomStringConvertible {
    package let network: ClientAddress
    package let prefixLength: Int

    package init?(_ text: String) {
        let parts = text.trimmingWhitespace().split(separator: "/", maxSplits: 1)
        guard let first = parts.first, let address = ClientAddress(String(first)) else { return nil }
        let bits = address.bytes.count * 8
        let length: Int
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...bits).contains(value) else { return nil }
            length = value
        } else {
            length = bits
        }
        network = address
        prefixLength = length
    }

    package func contains(_ address: ClientAddress) -> Bool {
        guard address.bytes.count == network.bytes.count else { return false }
        var remaining = prefixLength
        for (lhs, rhs) in zip(address.bytes, network.bytes) where remaining > 0 {
            let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
            if lhs & mask != rhs & mask { return false }
            remaining -= 8
        }
        return true
    }

    package var description: String { "\(network)/\(prefixLength)" }
}

/// Which address a request is from: the peer's, or, when the peer is a trusted proxy (`api_trusted_proxies`), the
/// address it puts in `X-Forwarded-For` (the rightmost one not itself a trusted proxy: a client can write anything
/// to the left).
package struct ClientAddressResolver: Sendable {
    package let trustedProxies: [CIDR]
    /// How many leading bits group IPv6 clients for the limits (`api_ipv6_prefix`, default 64).
    package let ipv6Prefix: Int

    package init(trustedProxies: [CIDR], ipv6Prefix: Int = 64) {
        self.trustedProxies = trustedProxies
        self.ipv6Prefix = ipv6Prefix
    }

    /// The key the limits count `address` by.
    package func limitKey(_ address: ClientAddress) -> String { address.limitKey(ipv6Prefix: ipv6Prefix) }

    package func isTrusted(_ address: ClientAddress) -> Bool { trustedProxies.contains { $0.contains(address) } }

    package func client(peer: ClientAddress?, forwardedFor: String?) -> ClientAddress? {
        guard let peer, isTrusted(peer), let forwardedFor else { return peer }
        var client = peer
        for entry in forwardedFor.split(separator: ",").reversed() {
            guard let address = ClientAddress(String(entry)) else { return client }
            client = address
            if !isTrusted(address) { return address }
        }
        return client
    }
}
