// The smallest swift-nio HTTP/1 server that answers a JSON body: the candidate measured
// against libmicrohttpd for playd's web listener (issue 44) by scripts/bench-web.
import NIOCore
import NIOPosix
import NIOHTTP1
final class Handler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        let body = #"{"ok":true,"pong":true}"#
        var head = HTTPResponseHead(version: .http1_1, status: .ok)
        head.headers.add(name: "Content-Type", value: "application/json")
        head.headers.add(name: "Content-Length", value: "\(body.utf8.count)")
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let port = Int(CommandLine.arguments.dropFirst().first ?? "8099") ?? 8099
let channel = try ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 128)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { ch in
        ch.pipeline.configureHTTPServerPipeline().flatMap { ch.pipeline.addHandler(Handler()) }
    }
    .bind(host: "127.0.0.1", port: port).wait()
try channel.closeFuture.wait()
