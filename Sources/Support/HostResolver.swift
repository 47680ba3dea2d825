package import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Resolves a host name to its addresses with the system's resolver (getaddrinfo), off the event loops.
package enum HostResolver {
    /// The name did not resolve.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// getaddrinfo on NIO's thread pool (it blocks).
    package static func resolve(host: String, port: Int) async throws -> [SocketAddress] {
        try await NIOThreadPool.singleton.runIfActive {
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            hints.ai_family = AF_UNSPEC
            var result: UnsafeMutablePointer<addrinfo>?
            let status = getaddrinfo(host, String(port), &hints, &result)
            guard status == 0, let first = result else {
                throw Failure(description: "\(host) does not resolve (\(String(cString: gai_strerror(status))))")
            }
            defer { freeaddrinfo(first) }
            var addresses: [SocketAddress] = []
            var next: UnsafeMutablePointer<addrinfo>? = first
            while let info = next {
                if let address = info.pointee.ai_addr {
                    switch Int32(info.pointee.ai_family) {
                    case AF_INET:
                        address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                            addresses.append(SocketAddress($0.pointee, host: host))
                        }
                    case AF_INET6:
                        address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                            addresses.append(SocketAddress($0.pointee, host: host))
                        }
                    default: break
                    }
                }
                next = info.pointee.ai_next
            }
            return addresses
        }
    }

    /// The host's addresses as ``ClientAddress`` values (for a scope check that connects nowhere).
    package static func addresses(host: String, port: Int) async throws -> [ClientAddress] {
        try await resolve(host: host, port: port).compactMap { $0.ipAddress.flatMap(ClientAddress.init) }
    }
}
