"""The panel's pages as buttons in rows: every name whole at any panel width. A tab bar
of eight pages cuts each name to its first letter in a narrow panel (or hides pages
behind scroll arrows)."""

from PySide6.QtWidgets import (
    QButtonGroup,
    QGridLayout,
    QSizePolicy,
    QTabWidget,
    QToolButton,
    QWidget,
)

COLUMNS = 4


class PageButtons(QWidget):
    """Stands in for ``tabs``' own tab bar (hidden): a click shows that page, and the
    button of the page on show is the checked one."""

    def __init__(self, tabs: QTabWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("pageButtons")
        self.tabs = tabs
        grid = QGridLayout(self)
        grid.setContentsMargins(4, 4, 4, 4)
        grid.setSpacing(3)
        self.group = QButtonGroup(self)
        for index in range(tabs.count()):
            button = QToolButton(text=tabs.tabText(index), checkable=True)
            button.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
            self.group.addButton(button, index)
            grid.addWidget(button, index // COLUMNS, index % COLUMNS)
        self.group.idClicked.connect(tabs.setCurrentIndex)
        tabs.currentChanged.connect(self._show_current)
        tabs.tabBar().hide()
        self._show_current(tabs.currentIndex())

    def buttons(self) -> list[QToolButton]:
        return [self.group.button(index) for index in range(self.tabs.count())]

    def sync(self) -> None:
        """Each button enabled as its page is, with the page's tooltip (why it is not)."""
        for index, button in enumerate(self.buttons()):
            button.setEnabled(self.tabs.isTabEnabled(index))
            button.setToolTip(self.tabs.tabToolTip(index))

    def _show_current(self, index: int) -> None:
        if (button := self.group.button(index)) is not None:
            button.setChecked(True)
