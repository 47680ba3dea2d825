import Testing

@testable import Support

@Suite struct ClientAddressTests {
    @Test func ipv4IsKeyedWholeIPv6ByItsSlash64() {
        #expect(ClientAddress("203.0.113.7")?.limitKey == "203.0.113.7")
        #expect(ClientAddress("::ffff:203.0.113.7")?.limitKey == "203.0.113.7", "a v4 client of a dual-stack socket")
        #expect(ClientAddress("2001:db8:1:2:aaaa::1")?.limitKey == "2001:db8:1:2::/64")
        #expect(ClientAddress("2001:db8:1:2:bbbb::9")?.limitKey == ClientAddress("2001:db8:1:2::1")?.limitKey)
        #expect(ClientAddress("2001:db8:1:3::1")?.limitKey != ClientAddress("2001:db8:1:2::1")?.limitKey)
        // api_ipv6_prefix 56: the /64s of one subscriber's /56 share one key, the next /56 does not.
        let a = ClientAddress("2001:db8:1:2a7::1")!.limitKey(ipv6Prefix: 56)
        #expect(a == "2001:db8:1:200::/56")
        #expect(ClientAddress("2001:db8:1:2ff:9::9")!.limitKey(ipv6Prefix: 56) == a)
        #expect(ClientAddress("2001:db8:1:300::1")!.limitKey(ipv6Prefix: 56) != a)
        #expect(ClientAddress("2001:db8::5")!.limitKey(ipv6Prefix: 128) == "2001:db8:0:0:0:0:0:5/128")
        #expect(ClientAddress("2001:db8:ffff::5")!.limitKey(ipv6Prefix: 32) == "2001:db8::/32")
        #expect(ClientAddress("203.0.113.7")!.limitKey(ipv6Prefix: 56) == "203.0.113.7", "IPv4 whole")
        #expect(ClientAddress("not an address") == nil)
        #expect(ClientAddress("2001:db8::1")?.description == "2001:db8::1")
    }

    @Test func cidrs() {
        let network = CIDR("10.0.0.0/8")
        #expect(network?.contains(ClientAddress("10.200.1.1")!) == true)
        #expect(network?.contains(ClientAddress("11.0.0.1")!) == false)
        #expect(network?.contains(ClientAddress("::1")!) == false)
        #expect(CIDR("::1")?.contains(ClientAddress("::1")!) == true)
        #expect(CIDR("192.168.1.0/25")?.contains(ClientAddress("192.168.1.130")!) == false)
        #expect(CIDR("10.0.0.0/33") == nil)
        #expect(CIDR("garbage") == nil)
    }

    @Test func forwardedForIsBelievedOnlyFromTrustedProxies() {
        let resolver = ClientAddressResolver(trustedProxies: [CIDR("127.0.0.1")!, CIDR("10.0.0.0/8")!])
        let proxy = ClientAddress("127.0.0.1")
        #expect(resolver.client(peer: proxy, forwardedFor: "198.51.100.9")?.description == "198.51.100.9")
        #expect(
            resolver.client(peer: proxy, forwardedFor: "1.2.3.4, 198.51.100.9, 10.1.1.1")?.description == "198.51.100.9",
            "the rightmost address that is not a trusted proxy; what the client wrote to its left is ignored"
        )
        #expect(resolver.client(peer: ClientAddress("198.51.100.7"), forwardedFor: "1.2.3.4")?.description == "198.51.100.7")
        #expect(resolver.client(peer: proxy, forwardedFor: nil)?.description == "127.0.0.1")
        #expect(resolver.client(peer: proxy, forwardedFor: "junk")?.description == "127.0.0.1")
    }
}
