import NIOSSL

/// TLS contexts for connections to APNs (or the simulator), built once per process and reused.
public enum GatewayTLS {
    /// A client context presenting `identity`, trusting the system's roots plus `caFile` (the simulator's CA).
    public static func clientContext(identity: ClientIdentity, caFile: String?) throws(CertificateError) -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.certificateChain = identity.certificateChain.map { .certificate($0) }
        configuration.privateKey = .privateKey(identity.privateKey)
        if let caFile {
            configuration.additionalTrustRoots = [.file(caFile)]
        }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw CertificateError(
                code: .invalidTLSSetup,
                path: caFile ?? identity.path,
                reason: "cannot set up TLS (does the key match the certificate? is the CA file PEM?): \(error)"
            )
        }
    }
}
