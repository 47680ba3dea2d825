#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A loopback TCP port the kernel hands out as free (bound, then released), for a child process to listen on
/// (the benchmark, the tests). Another process may take it in between: callers retry or tolerate that.
package enum FreePort {
    package struct Unavailable: PushChatError {
        package typealias Code = ErrorCode<Unavailable>
        package var code: Code { .noPort }
        package var reason: String { "the kernel handed out no free loopback port" }
        package var description: String { reason }
    }

    package static func loopback() throws(Unavailable) -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Unavailable() }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else { throw Unavailable() }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

extension ErrorCode where Domain == FreePort.Unavailable {
    package static let noPort = Self("noPort")
}
