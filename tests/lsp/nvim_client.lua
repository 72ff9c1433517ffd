-- A real editor as the client: headless Neovim (Debian 12's 0.7) with the init.lua that docs/editors.md
-- documents, a real corpus log opened by name. This script starts nothing: it checks that the documented
-- setup gave the buffer the `log` filetype and attached one `firstfault` client, then what vim.diagnostic.get()
-- holds, the hover, an edit, a second log sharing the client, and the server's exit. Run by nvim_test.sh:
--   FF_SECOND_LOG=... nvim --headless FILE.log -c "luafile nvim_client.lua"   (with the snippet as init.lua)
-- Exits 0 when every check passes, 1 with the failures on stderr otherwise. Every wait is vim.wait() on a
-- condition, bounded by a deadline.
local second_log = os.getenv("FF_SECOND_LOG")
local wait_ms = 240000
local attach_ms = 20000
local failures = {}
local function check(ok, what)
  if not ok then table.insert(failures, what) end
end
local function finish()
  for _, f in ipairs(failures) do io.stderr:write("nvim client: FAIL " .. f .. "\n") end
  if #failures == 0 then io.stdout:write("nvim client: every check passed\n") end
  vim.cmd(#failures == 0 and "qall!" or "cquit 1")
end
-- The firstfault clients attached to a buffer.
local function firstfault_clients(buf)
  local out = {}
  for _, c in pairs(vim.lsp.buf_get_clients(buf)) do
    if c.name == "firstfault" then table.insert(out, c) end
  end
  return out
end

local ok, err = pcall(function()
  local buf = vim.api.nvim_get_current_buf()
  check(vim.bo[buf].filetype == "log", "the documented setup gave the log the filetype log (got '" .. vim.bo[buf].filetype .. "')")
  local attached = vim.wait(attach_ms, function() return #firstfault_clients(buf) > 0 end, 20)
  check(attached, "the documented setup attached a firstfault client within " .. attach_ms .. " ms")
  if not attached then return end
  check(#firstfault_clients(buf) == 1, "exactly one firstfault client on the buffer")
  local client = firstfault_clients(buf)[1]
  local client_id = client.id
  local exited = nil
  -- The client reads config.on_exit when the server exits: the exit status is observable without owning the start.
  client.config.on_exit = function(code) exited = code end
  -- Any client-side protocol error from here on (an answer to no request, a duplicated answer, a bad frame)
  -- fails the test.
  client.config.on_error = function(code, e)
    table.insert(failures, "client error " .. tostring(vim.lsp.client_errors[code] or code) .. ": " .. vim.inspect(e))
  end

  local got = vim.wait(wait_ms, function() return #vim.diagnostic.get(buf) > 0 end, 50)
  check(got, "diagnostics arrived within " .. wait_ms .. " ms")
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local oom
  for i, l in ipairs(lines) do
    if l:find("CUDA out of memory", 1, true) then oom = i - 1 break end
  end
  local errors, infos = {}, {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.severity == vim.diagnostic.severity.ERROR then table.insert(errors, d) end
    if d.severity == vim.diagnostic.severity.INFO then table.insert(infos, d) end
  end
  check(#errors == 1, "one Error diagnostic (got " .. #errors .. ")")
  if errors[1] then
    check(errors[1].lnum == oom, "the Error is on the OOM line " .. tostring(oom) .. " (got " .. errors[1].lnum .. ")")
    check(errors[1].source == "firstfault", "its source is firstfault")
    check(errors[1].message:find("rank 2", 1, true) ~= nil, "its message names rank 2: " .. errors[1].message)
  end
  check(#infos >= 1, "collateral lines are Information diagnostics")
  for _, d in ipairs(infos) do
    check(d.lnum ~= oom, "collateral is not on the root cause's line")
    check(d.message:find("collateral", 1, true) ~= nil, "collateral message: " .. d.message)
  end

  -- Hover on the root cause's line: the encyclopedia entry.
  local params = { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = oom or 0, character = 2 } }
  local res = vim.lsp.buf_request_sync(buf, "textDocument/hover", params, wait_ms) or {}
  local hover = res[client_id] and res[client_id].result
  check(hover ~= nil and hover.contents ~= nil, "hover answered")
  if hover and hover.contents then
    check(hover.contents.kind == "markdown", "hover is markdown")
    check(hover.contents.value:lower():find("out of memory", 1, true) ~= nil, "hover shows the OOM entry")
  end

  -- An edit: three lines on top; the Error follows the OOM line down.
  vim.api.nvim_buf_set_lines(buf, 0, 0, false, { "[rank0]: edit 1", "[rank0]: edit 2", "[rank0]: edit 3" })
  local moved = vim.wait(wait_ms, function()
    for _, d in ipairs(vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR })) do
      if d.lnum == (oom or 0) + 3 then return true end
    end
    return false
  end, 50)
  check(moved, "after an edit the Error moved to line " .. tostring((oom or 0) + 3))

  -- A second log shares the server (the snippet starts one for every log buffer, not one each).
  vim.cmd("edit " .. vim.fn.fnameescape(second_log))
  local buf2 = vim.api.nvim_get_current_buf()
  check(vim.wait(attach_ms, function() return #firstfault_clients(buf2) > 0 end, 20), "the second log got a client")
  local c2 = firstfault_clients(buf2)[1]
  check(c2 ~= nil and c2.id == client_id, "the second log shares the first log's client")

  vim.lsp.stop_client(client_id)
  local stopped = vim.wait(wait_ms, function() return exited ~= nil end, 50)
  check(stopped, "the server exited after shutdown")
  check(exited == 0, "the server's exit status is 0 (got " .. tostring(exited) .. ")")
end)
check(ok, "no Lua error: " .. tostring(err))
finish()
