/// Where an IP address points, for the requests the daemon makes to URLs others chose (a webhook a customer names,
/// a push service a browser names): on the public internet, or inside a network (this host, the operator's LAN, a
/// cloud's metadata service, a range reserved for other uses), which such a request must not reach unless the
/// operator listed the host.
///
/// IPv6 forms that carry an IPv4 address (IPv4-mapped, NAT64's well-known prefix, 6to4) are judged by the IPv4
/// address inside, so `::ffff:127.0.0.1` or `64:ff9b::a9fe:a9fe` is no way around the check.
package enum AddressScope: Sendable, Equatable, CustomStringConvertible {
    case publicInternet
    /// Not on the public internet: `kind` says which range (`loopback`, `private`, `link-local`, `cloud metadata`…).
    case inside(kind: String)

    package var isPublic: Bool { self == .publicInternet }

    package var description: String {
        switch self {
        case .publicInternet: "public"
        case .inside(let kind): kind
        }
    }

    /// The scope of `address`.
    package init(_ address: ClientAddress) {
        self = address.isIPv6 ? Self.ipv6(address.bytes) : Self.ipv4(address.bytes)
    }

    /// IPv4 ranges that are not the public internet (IANA's special-purpose registry), the most specific first.
    static let ipv4Ranges: [(CIDR, String)] = [
        ("169.254.169.254/32", "cloud metadata"),
        ("0.0.0.0/8", "unspecified"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4 relay anycast"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
    ].map { (CIDR($0.0)!, $0.1) }

    /// IPv6 ranges that are not the public internet, the most specific first (those that embed an IPv4 address are
    /// handled before these).
    static let ipv6Ranges: [(CIDR, String)] = [
        ("fd00:ec2::254/128", "cloud metadata"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible (deprecated)"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only"),
        ("2001::/32", "Teredo"),
        ("2001:db8::/32", "documentation"),
        ("fc00::/7", "unique-local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated)"),
        ("ff00::/8", "multicast"),
    ].map { (CIDR($0.0)!, $0.1) }

    static let nat64 = CIDR("64:ff9b::/96")!
    static let sixToFour = CIDR("2002::/16")!

    private static func ipv4(_ bytes: [UInt8]) -> Self {
        guard let address = ClientAddress(bytes: bytes) else { return .inside(kind: "malformed") }
        for (range, kind) in ipv4Ranges where range.contains(address) { return .inside(kind: kind) }
        return .publicInternet
    }

    private static func ipv6(_ bytes: [UInt8]) -> Self {
        guard let address = ClientAddress(bytes: bytes) else { return .inside(kind: "malformed") }
        // An IPv4 address inside: judged as that address.
        let mapped = bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF  // ::ffff:0:0/96
        if mapped || nat64.contains(address) { return ipv4(Array(bytes.suffix(4))) }
        if sixToFour.contains(address) { return ipv4(Array(bytes[2..<6])) }
        for (range, kind) in ipv6Ranges where range.contains(address) { return .inside(kind: kind) }
        // Global unicast is 2000::/3; anything else is unassigned.
        return bytes[0] & 0xE0 == 0x20 ? .publicInternet : .inside(kind: "unassigned")
    }
}
