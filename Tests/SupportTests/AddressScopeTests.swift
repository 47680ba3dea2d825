import Testing

@testable import Support

/// Which addresses a request to a URL someone else chose may reach: the public internet only, whatever form the
/// address is written in.
@Suite struct AddressScopeTests {
    static func scope(_ text: String) -> AddressScope {
        guard let address = ClientAddress(text) else {
            Issue.record("\(text) does not parse")
            return .inside(kind: "unparsed")
        }
        return AddressScope(address)
    }

    @Test(arguments: [
        ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"),
        ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("192.168.1.1", "private"),
        ("169.254.169.254", "cloud metadata"), ("fd00:ec2::254", "cloud metadata"),
        ("169.254.10.1", "link-local"), ("fe80::1", "link-local"),
        ("fd12:3456::1", "unique-local"), ("fc00::1", "unique-local"),
        ("0.0.0.0", "unspecified"), ("::", "unspecified"),
        ("100.64.0.1", "shared address space (carrier-grade NAT)"),
        ("224.0.0.1", "multicast"), ("ff02::1", "multicast"), ("255.255.255.255", "reserved"),
        ("192.0.2.10", "documentation"), ("2001:db8::1", "documentation"), ("198.18.0.1", "benchmarking"),
    ])
    func insideTheNetwork(_ address: String, _ kind: String) {
        #expect(Self.scope(address) == .inside(kind: kind), "\(address)")
    }

    @Test func anIPv4AddressWrittenAsIPv6IsJudgedAsItself() {
        #expect(Self.scope("::ffff:127.0.0.1") == .inside(kind: "loopback"), "IPv4-mapped")
        #expect(Self.scope("::ffff:a9fe:a9fe") == .inside(kind: "cloud metadata"), "IPv4-mapped, in hex")
        #expect(Self.scope("64:ff9b::a9fe:a9fe") == .inside(kind: "cloud metadata"), "NAT64's prefix")
        #expect(Self.scope("64:ff9b::0a00:0001") == .inside(kind: "private"))
        #expect(Self.scope("2002:7f00:0001::1") == .inside(kind: "loopback"), "6to4 of 127.0.0.1")
        #expect(Self.scope("2002:c0a8:0101::1") == .inside(kind: "private"), "6to4 of 192.168.1.1")
        #expect(Self.scope("::127.0.0.1") == .inside(kind: "IPv4-compatible (deprecated)"))
        #expect(Self.scope("64:ff9b::0808:0808").isPublic, "NAT64 of a public address stays public")
        #expect(Self.scope("2002:0808:0808::1").isPublic)
    }

    @Test func publicAddressesPass() {
        for address in [
            "8.8.8.8", "1.1.1.1", "172.32.0.1", "172.15.255.255", "100.128.0.1", "169.253.1.1", "2606:4700::1111", "2a00:1450::1",
        ] {
            #expect(Self.scope(address).isPublic, "\(address)")
        }
        #expect(Self.scope("4000::1") == .inside(kind: "unassigned"), "outside 2000::/3")
    }
}
