// The live swarm page every daemon serves on its metrics port (next to
// /metrics): GET / is one self-contained HTML page (inline CSS and
// JavaScript, plots drawn as inline SVG; no external asset, so it works on
// a machine with no internet and behind any proxy), GET /status.json the
// StatusBoard's document it renders (Note [Status JSON] in
// status_board.cc). The page arrives with the current document inlined,
// so it shows the node at once (and in a browser with no fetch at all);
// then it polls /status.json every two seconds.
//
//   SS_ASSIGN_OR_RETURN(auto server, MetricsServer::Start(&metrics, host, port,
//                                                         StatusPages(&board)));
//
// Untrusted text (peers' addresses, status messages) reaches the DOM only
// through textContent, never as markup.
//
// Thread rule: the pages render on the metrics server's thread; `board`
// must outlive the server.
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_STATUS_PAGE_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_STATUS_PAGE_H_

#include <string>
#include <vector>

#include "node/daemon/reporting/metrics.h"
#include "node/daemon/reporting/status_board.h"

namespace skipswarm::node {

// The HTML page with `status_json` inlined as its first document.
std::string RenderStatusPage(const std::string& status_json);

// GET / (RenderStatusPage of the board's document) and GET /status.json.
std::vector<HttpPage> StatusPages(const StatusBoard* board);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_STATUS_PAGE_H_
