package import APNs
package import FCM
import Foundation
import Settings
import Support
import _CryptoExtras

/// Everything the APNs simulator needs to start: where to listen, its TLS identity and trusted client CA, which
/// tokens Apple would call unregistered, what the feedback service reports, and the faults to inject.
package struct SimulatorConfiguration: Sendable {
    /// The address every listener binds. Loopback only by default.
    package var host = "127.0.0.1"
    /// The binary gateway's port (Apple: 2195); 0 picks a free port.
    package var gatewayPort = 2195
    /// The feedback service's port (Apple: 2196); 0 picks a free port.
    package var feedbackPort = 2196
    /// The HTTP/2 provider API's port (Apple: 443, also 2197); 0 picks a free port.
    package var http2Port = 2197
    /// What the HTTP/2 listener checks, and its faults.
    package var http2 = HTTP2Options()
    /// The Google side's port (FCM's HTTP v1 API and the OAuth token endpoint, one TLS listener); 0 picks a free port,
    /// `nil` (the default) leaves it off.
    package var fcmPort: Int?
    /// What the Google side checks, and its faults.
    package var fcm = FCMOptions()
    /// The browsers' push service (Web Push, RFC 8030; TLS, HTTP/2), when configured; 0 picks a free port.
    package var webPushPort: Int?
    package var webPush = WebPushOptions()
    /// The read-only HTTP status page's port; 0 picks a free port, `nil` disables it.
    package var statusPort: Int? = 8095

    /// The simulator's certificate (PEM) and key.
    package var serverCertificate: String
    package var serverKey: String
    /// The CA that must have signed every client certificate (a missing or foreign certificate fails the handshake).
    package var clientCA: String

    /// Hex tokens answered with status 8 (invalid token), lower case.
    package var unregisteredTokens: Set<String> = []
    /// What the feedback service reports on the next connection (served once, as Apple clears its list).
    package var feedbackTuples: [FeedbackTuple] = []
    /// How the feedback service misbehaves, for tests of the feedback job.
    package var feedbackFault: FeedbackFault = .none

    /// The JSON-lines file every accepted notification is appended to; `nil` for none.
    package var recordFile: String?
    /// With `recordFile`: only notifications whose device token starts with this are written (and counted as
    /// `recorded`); the others are counted only.
    package var recordTokenPrefix: String?
    /// Keep every accepted notification in memory (tests read them back); otherwise only the last ``recentLimit``.
    package var keepAll = false
    package var recentLimit = 1000
    /// Secrets (`whsec_…`) the status page's `POST /webhooks` checks signatures with; none: it takes every POST.
    package var webhookSecrets: [String] = []

    package var faults = Faults()

    package init(serverCertificate: String, serverKey: String, clientCA: String) {
        self.serverCertificate = serverCertificate
        self.serverKey = serverKey
        self.clientCA = clientCA
    }

    /// The development certificates made by `deploy/dev-certs.sh DIR`.
    package init(certificateDirectory directory: String) {
        self.init(
            serverCertificate: directory + "/server.pem",
            serverKey: directory + "/server-key.pem",
            clientCA: directory + "/ca.pem"
        )
    }

    /// Gateway misbehaviour for tests and demos. Counts are per connection.
    package struct Faults: Sendable, Equatable {
        /// Close the connection without an error response after this many accepted notifications.
        package var closeAfterFrames: Int?
        /// Answer status 10 (shutdown, identifier = the last accepted) and close after this many notifications.
        package var shutdownAfterFrames: Int?
        /// Wait this long before each read from a connection (backpressure on the sender).
        package var readDelay: Duration?
        /// Hold each error response this long before writing it (an answer still on its way when the sender stops).
        package var errorResponseDelay: Duration?
        /// Refuse (close at once) every connection for this long after start.
        package var refuseConnectionsFor: Duration?
        /// Hex tokens answered with status 1 (processing error), to exercise the sender's bounded retries.
        package var processingErrorTokens: Set<String> = []

        package init() {}
    }

    /// Feedback service misbehaviour.
    package enum FeedbackFault: String, Sendable, CaseIterable {
        case none
        /// Send the tuples, then half a tuple, then close.
        case truncated
        /// Send bytes that are no tuples.
        case garbage
        /// Send the tuples and never close.
        case hang
        /// Send the tuples, then close the TCP connection without TLS close_notify (an unclean shutdown, as an
        /// independent implementation of the service does).
        case unclean
        /// Send the tuples and half a tuple, then close without close_notify.
        case uncleanTruncated = "unclean-truncated"
        /// Send the tuples again and again, never closing (a service gone mad, for the reader's cap).
        case endless
    }

    /// The HTTP/2 listener: how it authenticates and what it injects.
    package struct HTTP2Options: Sendable {
        /// Checks provider tokens (token authentication); without it only clients with a certificate get through.
        package var verifiers: [ProviderTokenVerifier] = []
        /// The apps' bundle ids: when any are set, an `apns-topic` that is none of them (nor one with a push type's
        /// suffix) gets 400 BadTopic.
        package var topics: [String] = []
        /// SETTINGS_MAX_CONCURRENT_STREAMS advertised to clients. Apple: 1000 (it may start lower).
        package var maxConcurrentStreams = 1000
        /// Send GOAWAY after this many requests on a connection (later streams are not processed), then close.
        package var goAwayAfterStreams: Int?
        /// The first N requests (over all connections) get 503 ServiceUnavailable.
        package var unavailableRequests = 0
        /// Tokens answered 429 TooManyRequests the first time they are seen.
        package var throttledTokens: Set<String> = []
        /// The first N requests are never answered (a stuck peer).
        package var silentRequests = 0
        /// Wait this long before each answer.
        package var answerDelay: Duration?
        /// Every token is from the other environment (sandbox tokens sent to production): each request is answered
        /// 400 BadDeviceToken, as Apple does.
        package var otherEnvironment = false

        package init() {}
    }

    /// The Google side: the service accounts whose assertions it takes, and what it answers.
    package struct FCMOptions: Sendable {
        /// The service accounts it knows (their public keys verify the assertions; their projects take messages).
        package var accounts: [FCMAccount] = []
        /// Registration tokens answered 404 UNREGISTERED.
        package var unregisteredTokens: Set<String> = []
        /// Registration tokens answered 403 SENDER_ID_MISMATCH (registered for another project).
        package var senderMismatchTokens: Set<String> = []
        /// The first N messages get 429 QUOTA_EXCEEDED with `Retry-After: 1`.
        package var quotaExceededRequests = 0
        /// The next N messages (after the quota faults) get 503 UNAVAILABLE.
        package var unavailableRequests = 0
        /// Seconds an access token it issues is good for (Google: 3599).
        package var accessTokenLifetime = 3599
        /// Wait this long before each answer to a message (FCM busy; rows stay in flight).
        package var answerDelay: Duration?
        /// Speak HTTP/1.1 only (ALPN `http/1.1`), as a push service without HTTP/2 would; otherwise both, HTTP/2 first.
        package var http1Only = false
        /// Whether each message is opened as its browser would (its lock screen, its payload recorded). A real push
        /// service cannot open them: the benchmark turns this off so the far end costs what a push service costs.
        package var opensMessages = true

        package init() {}
    }

    /// The browsers' push service.
    package struct WebPushOptions: Sendable {
        /// Answer every message with this status (404, 410, 413, 429 or 503; 429 and 503 with `Retry-After: 1`)
        /// instead of delivering it.
        package var answer: Int?
        /// Wait this long before each answer (a push service far away; messages stay in flight).
        package var answerDelay: Duration?
        /// Speak HTTP/1.1 only (ALPN `http/1.1`), as a push service without HTTP/2 would; otherwise both, HTTP/2 first.
        package var http1Only = false
        /// Whether each message is opened as its browser would (its lock screen, its payload recorded). A real push
        /// service cannot open them: the benchmark turns this off so the far end costs what a push service costs.
        package var opensMessages = true

        package init() {}
    }

    /// A service account the Google side knows, from its key file (the simulator uses the public half).
    package struct FCMAccount: Sendable {
        package let projectID: String
        package let clientEmail: String
        package let tokenURI: String
        let publicKey: _RSA.Signing.PublicKey

        package init(_ account: ServiceAccount) {
            projectID = account.projectID
            clientEmail = account.clientEmail
            tokenURI = account.tokenURI.absoluteString
            publicKey = account.publicKey
        }
    }
}
