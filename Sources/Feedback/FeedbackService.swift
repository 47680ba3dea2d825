package import APNs
package import APNsTransport
import HTTP2Client
import Logging
import NIOCore
import NIOSSL
import Storage
import Support

/// What one connection to the feedback service delivered.
package struct FeedbackRead: Sendable, Equatable {
    /// Every whole tuple.
    package var tuples: [FeedbackTuple] = []
    /// The service sent more than the cap: reading stopped there.
    package var capped = false
    /// Bytes at the end that did not make a whole tuple (not processed).
    package var truncatedBytes = 0
    /// The service closed the TCP connection without TLS close_notify. Apple's service closed cleanly; an
    /// independent implementation does not. The whole tuples before it are as good as any.
    package var uncleanShutdown = false
}

/// Reads every tuple the binary feedback service sends, until it closes the connection.
package struct FeedbackServiceClient: Sendable {
    let connector: BinaryConnector
    /// The whole read must finish within this time: a service that never closes must not hang cron.
    let timeout: Duration

    /// The most tuples one run reads (a tuple is 38 bytes; Apple's service sends what it collected since the last
    /// read, far fewer): past it the connection is closed and the rest left for the next run.
    let maxTuples: Int

    package init(connector: BinaryConnector, timeout: Duration, maxTuples: Int = 1_000_000) {
        self.connector = connector
        self.timeout = timeout
        self.maxTuples = maxTuples
    }

    /// The tuples, and how many bytes of an incomplete last tuple were dropped.
    package func readAll() async throws -> FeedbackRead {
        let (channel, _) = try await connector.connect()
        let endpoint = connector.endpoint
        let timeout = self.timeout
        do {
            return try await withDeadline(timeout) {
                try await channel.executeThenClose { inbound, _ in
                    var buffer = ByteBuffer()
                    var read = FeedbackRead()
                    do {
                        reading: for try await chunk in inbound {
                            buffer.writeImmutableBuffer(chunk)
                            while let tuple = try FeedbackTuple.read(from: &buffer) {
                                read.tuples.append(tuple)
                                // A service that never stops sending must not fill the memory in the timeout's time.
                                if read.tuples.count >= maxTuples {
                                    read.capped = true
                                    break reading
                                }
                            }
                            buffer.discardReadBytes()
                        }
                    } catch NIOSSLError.uncleanShutdown {
                        read.uncleanShutdown = true
                    } catch let error as FeedbackDecodingError {
                        throw FeedbackError(
                            code: .malformedData,
                            reason: "\(endpoint) sent data that is not feedback tuples (\(error.reason)); nothing was deleted"
                        )
                    } catch {
                        throw FeedbackError(code: .service, reason: "reading from \(endpoint) failed: \(GatewayError.describe(error))")
                    }
                    read.truncatedBytes = buffer.readableBytes
                    return read
                }
            }
        } catch is DeadlineExceeded {
            try? await channel.channel.close()
            throw FeedbackError(
                code: .service,
                reason: "\(endpoint) did not close the connection within \(timeout.formatted); nothing was deleted"
            )
        }
    }
}
