package import APNs
package import NIOSSL
import Settings
import Support

/// TLS contexts for connections to APNs (or the simulator), built once per process and reused.
package enum GatewayTLS {
    /// A client context presenting `identity`, trusting the system's roots plus `caFile` (the simulator's CA).
    /// With `alpn` ["h2"] for the HTTP/2 API (where the identity is optional: token authentication needs none).
    package static func clientContext(
        identity: ClientIdentity?,
        caFile: String?,
        alpn: [String] = []
    ) throws(CertificateError) -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.applicationProtocols = alpn
        if let identity {
            configuration.certificateChain = identity.certificateChain.map { .certificate($0) }
            configuration.privateKey = .privateKey(identity.privateKey)
        }
        if let caFile {
            configuration.additionalTrustRoots = [.file(caFile)]
        }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw CertificateError(
                code: .invalidTLSSetup,
                path: caFile ?? identity?.path ?? "(none)",
                reason: "cannot set up TLS (does the key match the certificate? is the CA file PEM?): \(error)"
            )
        }
    }
}
