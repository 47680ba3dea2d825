import Logging
import NIOCore
import Push
import Shared

/// Reads every tuple the binary feedback service sends, until it closes the connection.
public struct FeedbackServiceClient: Sendable {
    let connector: GatewayConnector
    /// The whole read must finish within this time: a service that never closes must not hang cron.
    let timeout: Duration

    public init(connector: GatewayConnector, timeout: Duration) {
        self.connector = connector
        self.timeout = timeout
    }

    /// The tuples, and how many bytes of an incomplete last tuple were dropped.
    public func readAll() async throws -> (tuples: [FeedbackTuple], truncatedBytes: Int) {
        let (channel, _) = try await connector.connect()
        let endpoint = connector.endpoint
        let timeout = self.timeout
        do {
            return try await withDeadline(timeout) {
                try await channel.executeThenClose { inbound, _ in
                    var buffer = ByteBuffer()
                    var tuples: [FeedbackTuple] = []
                    do {
                        for try await chunk in inbound {
                            buffer.writeImmutableBuffer(chunk)
                            while let tuple = try FeedbackTuple.read(from: &buffer) { tuples.append(tuple) }
                            buffer.discardReadBytes()
                        }
                    } catch let error as FeedbackDecodingError {
                        throw FeedbackError(
                            reason: "\(endpoint) sent data that is not feedback tuples (\(error.reason)); nothing was deleted"
                        )
                    } catch {
                        throw FeedbackError(reason: "reading from \(endpoint) failed: \(GatewayConnector.describe(error))")
                    }
                    return (tuples, buffer.readableBytes)
                }
            }
        } catch is DeadlineExceeded {
            try? await channel.channel.close()
            throw FeedbackError(reason: "\(endpoint) did not close the connection within \(timeout.formatted); nothing was deleted")
        }
    }
}
